import Foundation
import TapArguments
import TapCore
import TapCrypto
import TapEMV
import TapJOSE

/// `3dstape decode`: detects and decodes a JWS, JWE, JWT, base64url JSON, form body or JSON.
struct DecodeCommand: Command {
    let spec = CommandSpec(name: "decode", abstract: "Decode a JWS, JWE, JWT, creq/cres/threeDSMethodData value, form body or JSON",
                           usage: "[FILE|-] [--key PEM]... [--cek HEX]... [--trust PEM]... [--secret TEXT]... [--ds-id ID]... [--json]",
                           maxPositionals: 1, options: [key.spec, cek.spec, trust.spec, secret.spec, dsID.spec, json.spec, noMask.spec])
    static let key = Option("key", "PEM", PathValue(), repeatable: true, help: "private key (PEM, DER or JWK) for an RSA-OAEP-256 or ECDH-ES JWE")
    /// 16 or 32 bytes; a refusal shows only the first 8 digits (the rest is a key).
    static let cek = Option("cek", "HEX", CustomValue { (hex, o) throws(InvalidArguments) -> [UInt8] in
        guard let b = Hex.decode(hex), [16, 32].contains(b.count) else { throw InvalidArguments("--\(o) \(hex.prefix(8))…: expected 32 or 64 hex digits") }
        return b
    }, repeatable: true, help: "content key for a dir JWE (a 32-byte app-channel CEK works for both directions)")
    static let trust = Option("trust", "PEM", PathValue(), repeatable: true, help: "root certificate(s) an x5c chain must reach")
    static let secret = Option("secret", "TEXT", TextValue(), repeatable: true, help: "shared secret for an HS256 JWS or JWT")
    static let dsID = Option("ds-id", "ID", TextValue(), repeatable: true, help: "directoryServerID for EC deviceData (default: try the known ones)")
    static let json = Flag("json", help: "print one JSON object: kind, header, payload, verified, error (and fields)")
    static let noMask = Flag("no-mask", help: "show PANs and OTP entries unmasked")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        var keys = DecodeKeys()
        keys.mask = !args.has(Self.noMask)
        for path in try args.all(Self.key) { keys.privateKeys.append(try loadPrivateKey(path)) }
        keys.contentKeys = try args.all(Self.cek)
        for path in try args.all(Self.trust) {
            do { keys.trustRoots += try Certificate.parseAll(try readInput(path)) } catch let e as CryptoError {
                throw CommandFailure("--trust \(path): \(e.message)")
            }
        }
        keys.secrets = try args.all(Self.secret).map { Array($0.utf8) }
        keys.directoryServerIDs = try args.all(Self.dsID)

        let result = Decoder.decode(try readInput(args.positionals.first), keys: keys)
        if args.has(Self.json) {
            io.json(result.json)
        } else {
            printHuman(result, io: io, indent: "")
        }
        if let error = result.firstError {
            io.err("3dstape: decode: \(TerminalText.escaped(error))")
            return 1
        }
        return 0
    }

    func loadPrivateKey(_ path: String) throws -> PrivateKey {
        let bytes = try readInput(path)
        do {
            if bytes.first == UInt8(ascii: "{") {
                return try JWK(json: try JSON.parse(bytes)).privateKey()
            }
            return try PrivateKey(pemOrDER: bytes)
        } catch let e as CryptoError {
            throw CommandFailure("--key \(path): \(e.message)")
        } catch let e as JOSEError {
            throw CommandFailure("--key \(path): \(e.message)")
        } catch {
            throw CommandFailure("--key \(path): \(error)")
        }
    }

    /// The decoded value for a reader; everything in it came with the input, so it is printed escaped.
    func printHuman(_ r: DecodeResult, io: Terminal, indent: String) {
        io.out(indent + io.bold("kind: ") + r.kind.rawValue)
        if let h = r.header { io.out(indent + io.bold("header: ") + TerminalText.escapedJSON(h.compact)) }
        switch r.verified {
        case true?: io.out(indent + io.bold("verified: ") + io.green("yes"))
        case false?: io.out(indent + io.bold("verified: ") + io.red("NO"))
        case nil: break
        }
        for n in r.notes { io.out(indent + "# " + TerminalText.escaped(n)) }
        if let error = r.error {
            io.out(indent + io.bold("error: ") + io.red(TerminalText.escaped(error)))
            return
        }
        if let fields = r.fields {
            for (name, f) in fields {
                io.out(indent + io.bold("field \(TerminalText.escaped(name)):"))
                printHuman(f, io: io, indent: indent + "  ")
            }
        } else if let p = r.payload {
            io.out(indent + io.bold("payload:"))
            let text: String
            if case let .string(s) = p { text = TerminalText.escaped(s, keepingLineBreaks: true) } else { text = TerminalText.escapedJSON(p.pretty) }
            io.out(text.split(separator: "\n", omittingEmptySubsequences: false).map { indent + $0 }.joined(separator: "\n"))
        }
    }
}
