import TapCore
import TapHTTP

/// The one place an error becomes what 3dstape answers a client itself: the status a problem is answered with, and the
/// one error body shape, a JSON object whose `error` member says what went wrong (escaped as JSON, never interpolated:
/// the message may quote the client's bytes), followed by whatever the answering side adds (the recording proxy names
/// itself, the status and the upstream).
public enum HTTPErrorAnswer {
    /// The status a server answers a request it could not parse with.
    public static func status(for problem: HTTPParseError.Problem) -> Int {
        switch problem {
        case .malformed, .truncated: return 400
        case .headTooLarge: return 431
        case .requestLineTooLong: return 414
        case .bodyTooLarge: return 413
        case .unsupportedCoding, .methodTooLong: return 501
        }
    }

    /// The error body: `{"error": message, …more}`.
    public static func body(_ message: String, _ more: [(String, JSON)] = []) -> [UInt8] {
        JSON.object([("error", .string(message))] + more).bytes
    }

    /// A JSON error reply with this status and message (and extra header fields, e.g. a credentials challenge).
    public static func reply(status: Int, _ message: String, headers: [(String, String)] = []) -> HTTPReply {
        var reply = HTTPReply.json(body(message), status: status)
        reply.headers += headers
        return reply
    }

    /// The reply to a request that could not be parsed.
    public static func reply(for error: HTTPParseError) -> HTTPReply {
        reply(status: status(for: error.problem), error.message)
    }
}
