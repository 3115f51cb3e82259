/// A small typed router: a request's method and path lead to a value (a handler, or an enum naming one) through a table
/// written once, instead of string switches and `hasPrefix` chains. A pattern is exact (`/ds/areq`), has parameter
/// segments (`/api/sessions/:name` matches one non-empty segment and names it; `:name?` matches an empty one too, for a
/// handler that answers it itself), or is a prefix (`/3ds/rreq*` matches every path that begins with `/3ds/rreq`).
/// Routes are tried in the order they were added.
public struct HTTPRouter<Handler> {
    /// What a request leads to.
    public enum Match {
        /// A route: its handler, and the parameter segments by name.
        case found(Handler, parameters: [String: String])
        /// Some route has this path, none this method: the methods that have it, in the order they were added.
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    enum Pattern {
        case exact(String)
        case prefix(String)
        /// Segments after the leading `/`, the parameters named in `names` in their order.
        case segments([Segment], names: [String])
    }

    enum Segment {
        case literal(String)
        /// A parameter; `emptyAllowed`: declared `:name?`.
        case parameter(emptyAllowed: Bool)
    }

    struct Route {
        /// nil: any method.
        let method: String?
        let pattern: Pattern
        let handler: Handler
    }

    private var table: [Route] = []

    public init() {}

    /// Adds a route; `method` nil takes every method.
    public mutating func add(_ method: String?, _ pattern: String, _ handler: Handler) {
        let parsed: Pattern
        if pattern.hasSuffix("*") {
            parsed = .prefix(String(pattern.dropLast()))
        } else if pattern.contains("/:") {
            let parts = pattern.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
            let parameters = parts.filter { $0.hasPrefix(":") }
            parsed = .segments(parts.map { !$0.hasPrefix(":") ? .literal(String($0)) : .parameter(emptyAllowed: $0.hasSuffix("?")) },
                               names: parameters.map { $0.hasSuffix("?") ? String($0.dropFirst().dropLast()) : String($0.dropFirst()) })
        } else {
            parsed = .exact(pattern)
        }
        table.append(Route(method: method, pattern: parsed, handler: handler))
    }

    /// The route for a request (`path` without its query).
    public func route(method: String, path: String) -> Match {
        var allowed: [String] = []
        for route in table {
            guard let parameters = Self.match(route.pattern, path) else { continue }
            guard let m = route.method else { return .found(route.handler, parameters: parameters) }
            if m == method { return .found(route.handler, parameters: parameters) }
            if !allowed.contains(m) { allowed.append(m) }
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed)
    }

    static func match(_ pattern: Pattern, _ path: String) -> [String: String]? {
        switch pattern {
        case let .exact(p):
            return p == path ? [:] : nil
        case let .prefix(p):
            return path.hasPrefix(p) ? [:] : nil
        case let .segments(expected, names):
            guard path.hasPrefix("/") else { return nil }
            let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
            guard parts.count == expected.count else { return nil }
            var values: [String] = []
            for (part, want) in zip(parts, expected) {
                switch want {
                case let .literal(literal):
                    guard part == literal else { return nil }
                case let .parameter(emptyAllowed):
                    guard emptyAllowed || !part.isEmpty else { return nil }
                    values.append(String(part))
                }
            }
            return Dictionary(zip(names, values), uniquingKeysWith: { _, last in last })
        }
    }
}

extension HTTPRouter: Sendable where Handler: Sendable {}
extension HTTPRouter.Route: Sendable where Handler: Sendable {}
extension HTTPRouter.Pattern: Sendable {}
extension HTTPRouter.Segment: Sendable {}
