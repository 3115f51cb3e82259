/// The page's files, compiled into the binary (SwiftPM's `embedInCode` resources from `Assets/`): nothing is read
/// from disk or fetched at run time.
enum WebAssets {
    /// The asset served at `path`, or nil.
    static func file(_ path: String) -> (type: String, body: [UInt8])? {
        switch path {
        case "/", "/index.html": return ("text/html; charset=utf-8", PackageResources.index_html)
        case "/app.js": return ("text/javascript; charset=utf-8", PackageResources.app_js)
        case "/app.css": return ("text/css; charset=utf-8", PackageResources.app_css)
        default: return nil
        }
    }
}
