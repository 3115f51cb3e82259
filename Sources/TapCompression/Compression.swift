internal import CZlib

/// A zlib failure, with zlib's own message.
public struct CompressionError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// gzip and deflate through zlib, for HTTP bodies (decoded for storage) and compressed session blobs.
public enum Compression {
    /// The container around the deflate stream.
    public enum Format: Sendable {
        /// RFC 1952 gzip (`Content-Encoding: gzip`).
        case gzip
        /// RFC 1950 zlib (`Content-Encoding: deflate` as the RFC means it).
        case zlib
        /// RFC 1951 raw deflate (what some servers send as `deflate`).
        case raw

        var windowBits: Int32 {
            switch self {
            case .gzip: return 15 + 16
            case .zlib: return 15
            case .raw: return -15
            }
        }
    }

    /// Compresses `data`.
    public static func compress(_ data: [UInt8], format: Format, level: Int32 = 6) throws(CompressionError) -> [UInt8] {
        var stream = z_stream()
        guard tap_deflateInit2(&stream, level, format.windowBits) == Z_OK else { throw CompressionError("deflateInit2 failed") }
        defer { deflateEnd(&stream) }
        var out: [UInt8] = []
        let rc = pump(&stream, data, into: &out, step: { deflate(&$0, Z_FINISH) }, goOn: { rc, _, _ in rc == Z_OK })
        guard rc == Z_STREAM_END else { throw CompressionError("deflate failed: \(message(stream, rc))") }
        return out
    }

    /// Decompresses `data`, refusing output larger than `maxOutput` (a decompression bomb guard).
    /// For `.zlib`, a raw deflate stream is accepted too, since servers send both as `deflate`.
    public static func decompress(_ data: [UInt8], format: Format, maxOutput: Int = 64 << 20) throws(CompressionError) -> [UInt8] {
        let r = decompressPrefix(data, format: format, maxOutput: maxOutput)
        if let error = r.error { throw error }
        return r.decoded
    }

    /// `decompress` that keeps what it decoded before a failure: the bytes, and the error (nil when the whole stream
    /// decoded). A body cut short or corrupt part way still shows what arrived (the recorder stores that, masked, rather
    /// than compressed bytes it cannot mask). Past `maxOutput` nothing is kept.
    public static func decompressPrefix(_ data: [UInt8], format: Format, maxOutput: Int = 64 << 20) -> (decoded: [UInt8], error: CompressionError?) {
        let first = inflate(data, windowBits: format == .gzip ? 15 + 32 : format.windowBits, maxOutput: maxOutput)
        // `deflate` that is not zlib may be raw deflate; a zlib stream that decoded (some of) itself, or was too large, is not.
        guard first.error != nil, format == .zlib, first.decoded.isEmpty, !first.tooLarge else { return (first.decoded, first.error) }
        let raw = inflate(data, windowBits: -15, maxOutput: maxOutput)
        return (raw.decoded, raw.error)
    }

    static func inflate(_ data: [UInt8], windowBits: Int32, maxOutput: Int) -> (decoded: [UInt8], error: CompressionError?, tooLarge: Bool) {
        var stream = z_stream()
        guard tap_inflateInit2(&stream, windowBits) == Z_OK else { return ([], CompressionError("inflateInit2 failed"), false) }
        defer { inflateEnd(&stream) }
        var out: [UInt8] = []
        var tooLarge = false
        let rc = pump(&stream, data, into: &out, step: { CZlib.inflate(&$0, Z_NO_FLUSH) }, goOn: { rc, stream, decoded in
            if decoded > maxOutput { tooLarge = true; return false }
            return rc == Z_OK && (stream.avail_in > 0 || stream.avail_out == 0)
        })
        if tooLarge { return ([], CompressionError("decompressed body exceeds \(maxOutput) bytes"), true) }
        guard rc == Z_STREAM_END else {
            if rc == Z_OK || rc == Z_BUF_ERROR { return (out, CompressionError("compressed data is truncated"), false) }
            return (out, CompressionError("inflate failed: \(message(stream, rc))"), false)
        }
        return (out, nil, false)
    }

    /// Runs `step` (zlib's deflate or inflate on `stream`) over `data` through a 64 KB buffer, appending what each call
    /// wrote to `out`, for as long as `goOn` (given the step's return code, the stream and the bytes out so far) says;
    /// returns the last return code.
    @inline(__always)
    static func pump(_ stream: inout z_stream, _ data: [UInt8], into out: inout [UInt8], step: (inout z_stream) -> Int32,
                     goOn: (Int32, z_stream, Int) -> Bool) -> Int32 {
        var input = data
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        return input.withUnsafeMutableBufferPointer { inp in
            stream.next_in = inp.baseAddress
            stream.avail_in = UInt32(inp.count)
            var rc: Int32 = Z_OK
            repeat {
                rc = chunk.withUnsafeMutableBufferPointer { c in
                    stream.next_out = c.baseAddress
                    stream.avail_out = UInt32(c.count)
                    return step(&stream)
                }
                out += chunk.prefix(chunk.count - Int(stream.avail_out))
            } while goOn(rc, stream, out.count)
            return rc
        }
    }

    static func message(_ s: z_stream, _ rc: Int32) -> String {
        if let m = s.msg { return String(cString: m) }
        return "zlib error \(rc)"
    }
}
