import Foundation
import TapArguments
import TapCore
import TapHTTP
import TapHTTPService
import TapNet
import TapWeb

/// `3dstape web`: the web inspector over session files.
struct WebCommand: Command {
    let spec = CommandSpec(name: "web",
                           abstract: "Browse sessions in a web page: timeline waterfall, decrypted 3DS messages, sequence diagrams, validation, diffs; live while recording",
                           usage: "[DIR | SESSION...] [--listen HOST:PORT] [--open] [--allow-remote]", maxPositionals: 64,
                           options: [listen.spec, open.spec, allowRemote.spec])
    static let listen = Option("listen", "HOST:PORT", HostPortValue(), help: "address to serve on (default 127.0.0.1:8470; port 0 picks a free one)")
    static let open = Flag("open", help: "open the page in the desktop's browser (xdg-open)")
    static let allowRemote = Flag("allow-remote", help: "serve on an address other machines can reach (the page has no login; sessions hold masked card data)")

    func run(_ args: ParsedArguments, _ io: Terminal) throws -> Int32 {
        let listen = try args.listenAddresses(Self.listen, default: "127.0.0.1:8470")[0]
        try args.refuseRemote([listen], "the inspector has no login; add --allow-remote to serve there anyway")
        let catalog: SessionCatalog
        do { catalog = try SessionCatalog(paths: args.positionals.isEmpty ? ["sessions"] : args.positionals) } catch {
            throw CommandFailure("\(error)")
        }
        let stack = try ServiceStack.foreground()
        let inspector = WebInspector(catalog: catalog, loop: stack.loop) { line in
            StandardStreams.err(Data("3dstape: web: \(line)\n".utf8))
        }
        let bound: HostPort
        do { bound = try inspector.start(on: listen.bound) } catch { throw CommandFailure("cannot listen on \(listen): \(error)") }
        let host = bound.host.contains(":") ? "[\(bound.host)]" : bound.host
        let url = "http://\(host):\(bound.port)/"
        let served = catalog.entries()
        io.out("3dstape web: \(url)  (\(counted(served.count, "session")); read-only; Ctrl-C stops)")
        if args.has(Self.open) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = ["xdg-open", url]
            do { try p.run() } catch { io.err("3dstape: web: --open: cannot start xdg-open (\(error)); open \(url) yourself") }
        }
        stack.onStop { inspector.stop() }
        stack.runUntilSignal()
        return 0
    }
}
