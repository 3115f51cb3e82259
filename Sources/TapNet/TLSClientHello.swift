/// What a TLS ClientHello says before any key is exchanged: the server name (SNI) and the application protocols offered
/// (ALPN). Read from the first bytes a client sends in a tunnel that 3dstape passes through without interception, so
/// that the tunnel's record names the host the client meant and the protocols it asked for. Sans-IO and bounded:
/// truncated, oversized or garbage input gives `needMore` or `notClientHello`, never a crash.
public struct TLSClientHello: Sendable, Equatable {
    /// The `server_name` extension's host name, if sent (ASCII as sent; not checked against the CONNECT target).
    public var serverName: String?
    /// The ALPN protocol names offered, in the client's order (empty when the extension is absent).
    public var alpn: [String]

    /// A ClientHello is read from at most this many bytes of records (the handshake message itself is limited to 16 KiB).
    public static let maxBytes = 64 * 1024

    public enum Outcome: Sendable, Equatable {
        case hello(TLSClientHello)
        /// What is there is the start of a ClientHello: give more bytes.
        case needMore
        /// Not a TLS ClientHello (another protocol, a malformed or oversized message).
        case notClientHello
    }

    public init(serverName: String?, alpn: [String]) {
        self.serverName = serverName
        self.alpn = alpn
    }

    /// The ClientHello at the start of `bytes`, a client's first bytes on a connection.
    public static func read(_ bytes: [UInt8]) -> Outcome {
        // Handshake records (content type 22) carry the message; it may be split across several.
        var message: [UInt8] = []
        var at = 0
        while true {
            guard at + 5 <= bytes.count else { return bytes.count >= maxBytes ? .notClientHello : .needMore }
            guard bytes[at] == 22, bytes[at + 1] == 3 else { return .notClientHello }
            let length = Int(bytes[at + 3]) << 8 | Int(bytes[at + 4])
            guard length > 0, length <= 16_384 + 2048 else { return .notClientHello }
            guard at + 5 + length <= bytes.count else { return at + 5 + length > maxBytes ? .notClientHello : .needMore }
            message += bytes[(at + 5)..<(at + 5 + length)]
            at += 5 + length
            guard message.count >= 4 else { continue }
            guard message[0] == 1 else { return .notClientHello }
            let bodyLength = Int(message[1]) << 16 | Int(message[2]) << 8 | Int(message[3])
            guard bodyLength <= 16_384 else { return .notClientHello }
            if message.count >= 4 + bodyLength {
                return parseBody(Array(message[4..<(4 + bodyLength)])).map(Outcome.hello) ?? .notClientHello
            }
        }
    }

    /// The body of a ClientHello handshake message (after its 4-byte header); nil when malformed.
    static func parseBody(_ body: [UInt8]) -> TLSClientHello? {
        var r = Reader(body)
        guard r.skip(2 + 32),                 // legacy_version, random
              r.skipVector(lengthBytes: 1),   // legacy_session_id
              r.skipVector(lengthBytes: 2),   // cipher_suites
              r.skipVector(lengthBytes: 1)    // legacy_compression_methods
        else { return nil }
        var hello = TLSClientHello(serverName: nil, alpn: [])
        if r.isAtEnd { return hello } // no extensions (a very old client)
        guard let extensions = r.vector(lengthBytes: 2), r.isAtEnd else { return nil }
        var e = Reader(extensions)
        while !e.isAtEnd {
            guard let type = e.integer(2), let data = e.vector(lengthBytes: 2) else { return nil }
            switch type {
            case 0: // server_name: a list of (type, name); type 0 is host_name
                var list = Reader(data)
                guard let names = list.vector(lengthBytes: 2), list.isAtEnd else { return nil }
                var n = Reader(names)
                while !n.isAtEnd {
                    guard let kind = n.integer(1), let name = n.vector(lengthBytes: 2) else { return nil }
                    if kind == 0, hello.serverName == nil { hello.serverName = String(decoding: name, as: UTF8.self) }
                }
            case 16: // application_layer_protocol_negotiation
                var list = Reader(data)
                guard let protocols = list.vector(lengthBytes: 2), list.isAtEnd else { return nil }
                var p = Reader(protocols)
                while !p.isAtEnd {
                    guard let name = p.vector(lengthBytes: 1), !name.isEmpty else { return nil }
                    hello.alpn.append(String(decoding: name, as: UTF8.self))
                }
            default:
                break
            }
        }
        return hello
    }

    /// Reads big-endian integers and length-prefixed vectors, refusing to go past the end.
    private struct Reader {
        let bytes: [UInt8]
        var at = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        var isAtEnd: Bool { at >= bytes.count }

        mutating func skip(_ n: Int) -> Bool {
            guard n >= 0, bytes.count - at >= n else { return false }
            at += n
            return true
        }

        mutating func integer(_ width: Int) -> Int? {
            guard bytes.count - at >= width else { return nil }
            var v = 0
            for i in 0..<width { v = v << 8 | Int(bytes[at + i]) }
            at += width
            return v
        }

        mutating func vector(lengthBytes: Int) -> [UInt8]? {
            guard let n = integer(lengthBytes), bytes.count - at >= n else { return nil }
            defer { at += n }
            return Array(bytes[at..<(at + n)])
        }

        mutating func skipVector(lengthBytes: Int) -> Bool { vector(lengthBytes: lengthBytes) != nil }
    }
}
