import Foundation

/// The session files `3dstape web` may serve: the `*.3dstape` files lying directly in the given directories (listed
/// afresh on each call, so a session recorded while the page is open appears) and the files given by name. A request
/// names a session by the name this catalog gave it, never by a path: nothing outside these files can be reached,
/// and a symbolic link in a directory that points outside it is left out.
public struct SessionCatalog: Sendable {
    /// A served session: the name the API and the page use, and the file.
    public struct Entry: Sendable, Equatable {
        public var name: String
        public var path: String
    }

    let directories: [String]
    let files: [String]

    /// `paths` are directories or session files; each must exist.
    public init(paths: [String]) throws {
        var dirs: [String] = [], files: [String] = []
        for p in paths {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: p, isDirectory: &isDir) else { throw WebError("\(p): no such file or directory") }
            guard let real = Self.realPath(p) else { throw WebError("\(p): cannot resolve the path") }
            if isDir.boolValue { dirs.append(real) } else { files.append(real) }
        }
        directories = dirs
        self.files = files
    }

    /// The sessions served now, in name order (directories first, then the files given by name).
    public func entries() -> [Entry] {
        var out: [Entry] = []
        var taken = Set<String>()
        func add(_ path: String, as given: String) {
            var name = given
            var n = 2
            while taken.contains(name) { name = "\(given)~\(n)"; n += 1 }
            taken.insert(name)
            out.append(Entry(name: name, path: path))
        }
        for dir in directories {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
            for n in names.sorted() where n.hasSuffix(".3dstape") {
                let full = (dir as NSString).appendingPathComponent(n)
                // A link may point anywhere: serve it only when the file it reaches is in this directory too.
                guard let real = Self.realPath(full), real.hasPrefix(dir.hasSuffix("/") ? dir : dir + "/") else { continue }
                var isDir: ObjCBool = false
                guard FileManager.default.fileExists(atPath: real, isDirectory: &isDir), !isDir.boolValue else { continue }
                add(real, as: n)
            }
        }
        for f in files { add(f, as: (f as NSString).lastPathComponent) }
        return out
    }

    /// The file of the session called `name`, or nil when no served session has that name.
    public func path(named name: String) -> String? {
        entries().first { $0.name == name }?.path
    }

    static func realPath(_ p: String) -> String? {
        guard let r = realpath(p, nil) else { return nil }
        defer { free(r) }
        return String(cString: r)
    }
}

/// A request the inspector cannot serve: the HTTP status and a message naming the problem.
public struct WebError: Error, CustomStringConvertible {
    public var status: Int
    public var message: String
    public init(_ message: String, status: Int = 400) {
        self.message = message
        self.status = status
    }
    public var description: String { message }
}
