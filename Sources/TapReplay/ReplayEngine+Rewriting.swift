import Foundation
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapJOSE
import TapStore

extension ReplayEngine {
    // MARK: rewriting

    func replaceAll(_ s: String, _ lf: LiveFlow) -> String {
        var out = s
        for (r, l) in lf.map where out.contains(r) { out = out.replacingOccurrences(of: r, with: l) }
        return out
    }

    /// The recorded ARes for the live transaction: IDs and URLs the live ones, masked authentication values
    /// regenerated, the fresh acsSignedContent and any transStatus fault. Filled into the ARes's template (no tree
    /// built); a transStatus fault, which may add a member, takes the tree and TapEMV's typed changes.
    func aresBody(_ flow: ReplayCatalog.RecordedFlow, _ lf: LiveFlow, _ rng: inout SeededRandom, transStatus: [String],
                  signedContent: String?) -> [UInt8] {
        if transStatus.isEmpty, let template = flow.aresTemplate {
            return template.render { _, hole in
                if hole.depth == 1, hole.key == ThreeDSMessage.acsSignedContentMember, let signedContent { return signedContent }
                if hole.key == ThreeDSMessage.authenticationValueMember, MaskVerdict.isSecretMask(hole.value) { return ReplayEngine.cavv(&rng) }
                return lf.value(hole.value)
            }
        }
        let changes = transStatus.map { MessageChange.transStatus(TransStatus(wire: $0)) } + (signedContent.map { [.acsSignedContent($0)] } ?? [])
        return rewrite(flow.aresJSON ?? .object([]), lf, &rng).applying(changes).bytes
    }

    /// Every string in `json` with recorded IDs and URLs replaced by live ones; masked values regenerated.
    func rewrite(_ json: JSON, _ lf: LiveFlow, _ rng: inout SeededRandom) -> JSON {
        switch json {
        case let .string(s): return .string(lf.value(s))
        case let .array(items): return .array(items.map { rewrite($0, lf, &rng) })
        case let .object(members):
            return .object(members.map { k, v in
                if k == ThreeDSMessage.authenticationValueMember, let s = v.stringValue, MaskVerdict.isSecretMask(s) {
                    return (k, .string(ReplayEngine.cavv(&rng)))
                }
                return (k, rewrite(v, lf, &rng))
            })
        default: return json
        }
    }

    /// HTML or text: base64url JSON in form values (a cres, a creq) rewritten inside, then IDs and URLs replaced. In a
    /// page a browser may render (`contentType` names HTML or XML, or is missing and the browser would sniff), each
    /// live value is escaped for where it lands: it comes from the live client (a notificationURL, threeDSSessionData).
    func rewriteText(_ text: String, _ lf: LiveFlow, _ rng: inout SeededRandom, contentType: String?) -> String {
        var out = ""
        var rest = Substring(text)
        while let r = rest.range(of: "value=\"") {
            out += rest[..<r.upperBound]
            rest = rest[r.upperBound...]
            guard let end = rest.firstIndex(of: "\"") else { break }
            let value = String(rest[..<end])
            if value.count > 16, let b = Base64URL.decode(value), let json = try? JSON.parse(b), json.isObject {
                out += Base64URL.encode(rewrite(json, lf, &rng).bytes)
            } else {
                out += value
            }
            rest = rest[end...]
        }
        out += rest
        guard ReplayEngine.rendersAsHTML(contentType) else { return replaceAll(out, lf) }
        return HTMLSubstitution.replacing(lf.map.map { (recorded: $0.0, live: $0.1) }, in: out)
    }

    /// Whether a browser may render a body of this type as a page: HTML or XML, or no type at all (it would sniff).
    static func rendersAsHTML(_ contentType: String?) -> Bool {
        guard let t = contentType?.lowercased() else { return true }
        return t.contains("html") || t.contains("xml")
    }

    /// A well-formed authentication value (20 bytes, base64) derived from the seed, in place of a masked one.
    static func cavv(_ rng: inout SeededRandom) -> String { ThreeDSMessage.authenticationValue(rng.bytes(20)) }
}
