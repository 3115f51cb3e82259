// swift-tools-version:6.0
// 3dstape: record, replay and inspect EMV 3-D Secure 2.x traffic.
// Layers, bottom up: a module uses only modules of a lower layer (tools/testing/layers.py checks the imports against this).
//   1. C bindings: COpenSSL, CSQLite, CZlib, CLinux, CFuzzDriver
//   2. values and parsing without I/O: TapCore
//   3. the C libraries wrapped, HTTP messages, typed command-line options: TapCrypto, TapCompression, TapSQLite, TapHTTP, TapArguments
//   4. JOSE, network I/O: TapJOSE, TapNet
//   5. the 3DS model, keys and the per-user directory, HTTP service: TapEMV, TapIdentity, TapHTTPService
//   6. session files: TapStore
//   7. what the recorder does before the writer stores (decoding, 3DS extraction and masking, decryption): TapRecording
//   8. the servers and what reads sessions: TapSandbox, TapProxy, TapReplay, TapInspect
//   9. features made of those: TapWeb, TapCheck, TapClientReplay
//  10. executables: TapCLI, TapFuzz, TapBench, TapInteropVectors
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "3dstape",
    products: [
        .executable(name: "3dstape", targets: ["TapCLI"]),
        .executable(name: "TapInteropVectors", targets: ["TapInteropVectors"]),
        .executable(name: "TapFuzz", targets: ["TapFuzz"]),
    ],
    targets: [
        // C bindings: one system module per library; each is imported by exactly one Swift module.
        // Found through pkg-config: Debian's packages, or Homebrew's on macOS (openssl@3 is keg-only: SwiftPM looks in its
        // opt/ prefix for a brew provider). Without a sqlite3.pc, the macOS SDK's SQLite is linked by the module map.
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
                       providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib",
                       providers: [.apt(["zlib1g-dev"])]),

        // C calls for TapNet: SO_ERROR and TCP_NODELAY everywhere; on Linux only, the calls Glibc does not export (epoll,
        // eventfd, accept4, prctl), used only by TapNet's Linux backend; _GNU_SOURCE is set in the .c file.
        .target(name: "CLinux", path: "Sources/CLinux"),

        // Pure Swift values and helpers shared by every layer: JSON with key order kept (and its one-pass member reader and
        // templates), base64url, hex, form bodies, HTML escaping and forms, the eight members a 3DS message is listed and stored by
        // (MessageFields: TapEMV's summary reads them, TapStore's messages table stores them), outside numbers checked into integers and durations,
        // text made safe for terminals and markup, files created without following links (and their locks), locks, a log
        // throttle, standard output and error, system calls.
        .target(name: "TapCore", swiftSettings: strict),
        // The only importer of OpenSSL: hashes, MACs, ciphers, keys, signatures, X.509 (and a CA), TLS contexts and sessions.
        .target(name: "TapCrypto", dependencies: ["COpenSSL", "TapCore"], swiftSettings: strict),
        // The only importer of zlib: gzip/deflate bodies.
        .target(name: "TapCompression", dependencies: ["CZlib"], swiftSettings: strict),
        // The only importer of SQLite: connections, statements, typed errors.
        .target(name: "TapSQLite", dependencies: ["CSQLite"], swiftSettings: strict),
        // HTTP/1.1 messages, an incremental parser, a typed router, the request-memory budget of a server's connections and
        // --auth's HTTP Basic check, free of I/O.
        .target(name: "TapHTTP", dependencies: ["TapCore"], swiftSettings: strict),
        // Network I/O: the event loop (epoll on Linux; poll(2) with -Xswiftc -DTHREEDSTAPE_POSIX_ONLY, what macOS compiles), timers, non-blocking TCP connections with optional TLS, listeners;
        // --listen addresses, CONNECT target patterns, names resolved off the loop, the loop-bound box (LoopConfined), a
        // ClientHello's SNI and ALPN, and ServiceStack (servers on a loop, stopped in order).
        .target(name: "TapNet", dependencies: ["CLinux", "TapCrypto", "TapCore"], swiftSettings: strict),
        // How every 3dstape server takes requests (HTTPRequestIntake, also the proxy's client side), the server side of a
        // connection as one sans-IO state machine (ServerConnectionMachine) with the policy types the proxy shares (deadlines,
        // read-ahead, output backpressure), a small HTTP server on the event loop that drives it, pass-through tunnels
        // (TunnelRelay), the one error body of every server (HTTPErrorAnswer), an HTTP client on the loop (and RReqSender on
        // it), and a blocking HTTP client.
        .target(name: "TapHTTPService", dependencies: ["TapNet", "TapHTTP", "TapCrypto", "TapCore"], swiftSettings: strict),
        // JOSE: JWK, JWS, JWE, JWT, including the EMV deviceData variant.
        .target(name: "TapJOSE", dependencies: ["TapCrypto", "TapCore"], swiftSettings: strict),
        // The typed EMV 3DS model: message kinds and summaries, versions, channels, categories, transStatus, transaction IDs,
        // the decryption state; the message builders and the typed changes made to a message; 3DS messages found in HTTP
        // bodies, masking and card-number redaction, app-channel crypto (CReq/CRes), acsSignedContent (and its bad-signature
        // fault), key logs, `decode`.
        .target(name: "TapEMV", dependencies: ["TapJOSE", "TapCrypto", "TapCore"], swiftSettings: strict),
        // The per-user directory (~/.3dstape) and the identities kept in it: the interception CA (and the Apple configuration
        // profile that installs it), the test key sets (the sandbox's and key substitution's DS root, DS and ACS keys), and a
        // DS's certificates as a client reads them (DSIdentity).
        .target(name: "TapIdentity", dependencies: ["TapJOSE", "TapCrypto", "TapCore"], swiftSettings: strict),
        // Typed command-line options, declared once (parsed, checked, and making --help), and the one exit-code rule (ExitStatus);
        // shaped like swift-argument-parser, which cannot be a dependency here.
        .target(name: "TapArguments", dependencies: ["TapCore"], swiftSettings: strict),
        // The built-in DS + ACS simulator (with its gateways and test cards), the SDK-like client that plays a 3DS SDK and a
        // 3DS Server, and client-replay's live side (ClientReplayer: recorded transactions re-sent with fresh IDs and keys).
        .target(name: "TapSandbox", dependencies: ["TapHTTPService", "TapNet", "TapHTTP", "TapEMV", "TapIdentity", "TapJOSE", "TapCrypto", "TapCore"],
                swiftSettings: strict),
        // Session files: the schema, the single writer (and its backpressure rule), and the reader. Knows the tables, not 3DS: what is stored of an
        // exchange is what the writer's stages (ExchangeStage) leave.
        .target(name: "TapStore", dependencies: ["TapSQLite", "TapCompression", "TapCore"], exclude: ["SCHEMA.md"],
                swiftSettings: strict),
        // The recorder's stages before the writer (content decoding, 3DS extraction and masking, app-channel decryption),
        // the session writer made with them (SessionWriter(path:meta:keys:)), `decrypt` of a stored session, and the one
        // reading of a stored decryption note.
        .target(name: "TapRecording", dependencies: ["TapStore", "TapEMV", "TapCompression", "TapCore"], swiftSettings: strict),
        // The recording proxy: forward (CONNECT + TLS interception with the CA it is given, or a pass-through tunnel) and reverse
        // modes, handing each exchange to a session writer; and key substitution (`record --decrypt substitute`).
        .target(name: "TapProxy", dependencies: ["TapHTTPService", "TapNet", "TapHTTP", "TapStore", "TapEMV", "TapJOSE", "TapCrypto", "TapCore"],
                swiftSettings: strict),
        // The replayer: plays the servers of a recorded session (matching, ID rewriting, fresh app-channel keys, timing), with
        // fault rules (message, gateway, transport) checked before it starts, and the named failure scenarios with their expectations.
        .target(name: "TapReplay", dependencies: ["TapHTTPService", "TapNet", "TapHTTP", "TapRecording", "TapStore", "TapEMV", "TapJOSE", "TapCrypto", "TapCore"],
                swiftSettings: strict),
        // Inspection and interchange: a session's 3DS transactions, validation against the 3DS rules, session diffs, HAR,
        // sequence diagrams (Mermaid, SVG), JSON renderings, `show --profile` (PXP, Trust Payments), the glossary.
        .target(name: "TapInspect", dependencies: ["TapRecording", "TapStore", "TapHTTP", "TapEMV", "TapJOSE", "TapCore"], swiftSettings: strict),
        // The web inspector (`3dstape web`): a read-only JSON API over session files and a single page, built in.
        .target(name: "TapWeb", dependencies: ["TapInspect", "TapRecording", "TapStore", "TapSQLite", "TapEMV", "TapHTTPService", "TapHTTP", "TapNet", "TapCore"],
                resources: [.embedInCode("Assets/index.html"), .embedInCode("Assets/app.js"), .embedInCode("Assets/app.css")],
                swiftSettings: strict),
        // Verdicts (`3dstape check`): what a client did in a failure scenario, read from the replay session, held against the
        // scenario's expectation; reports as a table, JSON, JUnit XML and HTML.
        .target(name: "TapCheck", dependencies: ["TapReplay", "TapRecording", "TapStore", "TapEMV", "TapCore"], swiftSettings: strict),
        // `client-replay`: a recorded session's client side re-sent to live servers (fresh IDs and keys), compared, under load.
        .target(name: "TapClientReplay", dependencies: ["TapSandbox", "TapReplay", "TapInspect", "TapRecording", "TapStore", "TapNet", "TapEMV", "TapJOSE", "TapCrypto", "TapCore"],
                swiftSettings: strict),
        // The `3dstape` command line.
        .executableTarget(name: "TapCLI",
                          dependencies: ["TapArguments", "TapCheck", "TapClientReplay", "TapInspect", "TapWeb", "TapProxy", "TapReplay", "TapSandbox", "TapHTTPService", "TapRecording", "TapStore", "TapNet", "TapHTTP",
                                         "TapEMV", "TapIdentity", "TapJOSE", "TapCrypto", "TapCore"],
                          swiftSettings: strict),
        // libFuzzer's driver entry point (header only; linked when built with -sanitize=fuzzer).
        .systemLibrary(name: "CFuzzDriver", path: "Sources/CFuzzDriver"),
        // Fuzz targets for the parsers, the HTTP server and the options (tools/fuzz/run.sh builds them with -sanitize=fuzzer and -DFUZZING).
        .executableTarget(name: "TapFuzz", dependencies: ["CFuzzDriver", "TapHTTP", "TapEMV", "TapJOSE", "TapStore", "TapCore",
                                                          "TapReplay", "TapNet", "TapCrypto", "TapInspect"]),
        // Component benchmarks for tools/bench (the session writer alone, beside Python's sqlite3; masking).
        .executableTarget(name: "TapBench", dependencies: ["TapRecording", "TapStore", "TapEMV", "TapCore"], swiftSettings: strict),
        // Writes Swift-made JOSE/EMV vectors for tools/interop (Python checks them).
        .executableTarget(name: "TapInteropVectors",
                          dependencies: ["TapEMV", "TapJOSE", "TapCrypto", "TapCore"],
                          swiftSettings: strict),

        .testTarget(name: "TapCoreTests", dependencies: ["TapCore"]),
        .testTarget(name: "TapArgumentsTests", dependencies: ["TapArguments", "TapCore"]),
        .testTarget(name: "TapHTTPTests", dependencies: ["TapHTTP", "TapCore"]),
        .testTarget(name: "TapCryptoTests", dependencies: ["TapCrypto", "TapCore"]),
        .testTarget(name: "TapCompressionTests", dependencies: ["TapCompression"]),
        .testTarget(name: "TapSQLiteTests", dependencies: ["TapSQLite"]),
        .testTarget(name: "TapJOSETests", dependencies: ["TapJOSE", "TapCrypto", "TapCore"],
                    exclude: ["Fixtures"]),
        .testTarget(name: "TapEMVTests", dependencies: ["TapEMV", "TapJOSE", "TapCrypto", "TapCore"]),
        .testTarget(name: "TapIdentityTests", dependencies: ["TapIdentity", "TapCrypto", "TapCore"]),
        .testTarget(name: "TapSandboxTests", dependencies: ["TapSandbox", "TapIdentity", "TapProxy", "TapRecording", "TapStore", "TapHTTPService", "TapNet", "TapHTTP",
                                                          "TapEMV", "TapJOSE", "TapCrypto", "TapCore"],
                    exclude: ["Fixtures"]),
        .testTarget(name: "TapReplayTests", dependencies: ["TapReplay", "TapRecording", "TapStore", "TapEMV", "TapJOSE", "TapCrypto", "TapCore", "TapHTTPService", "TapNet", "TapSQLite",
                                                           "TapTestSupport"]),
        // Helpers shared by test targets (not part of the product).
        .target(name: "TapTestSupport", dependencies: ["TapCore", "TapCrypto", "TapHTTP", "TapHTTPService", "TapNet", "TapSQLite"], path: "Tests/TapTestSupport",
                swiftSettings: strict),
        .testTarget(name: "TapStoreTests", dependencies: ["TapStore", "TapRecording", "TapEMV", "TapSQLite", "TapCompression", "TapCore"]),
        .testTarget(name: "TapInspectTests", dependencies: ["TapInspect", "TapRecording", "TapStore", "TapEMV", "TapJOSE", "TapCore"]),
        .testTarget(name: "TapProxyTests", dependencies: ["TapProxy", "TapRecording", "TapStore", "TapHTTP", "TapHTTPService", "TapNet", "TapCrypto", "TapSQLite", "TapCore",
                                                          "TapTestSupport"]),
        .testTarget(name: "TapHTTPServiceTests", dependencies: ["TapHTTPService", "TapHTTP", "TapNet", "TapCrypto", "TapCore", "TapTestSupport"]),
        .testTarget(name: "TapWebTests", dependencies: ["TapWeb", "TapInspect", "TapRecording", "TapStore", "TapHTTPService", "TapHTTP", "TapNet", "TapCrypto", "TapCore", "TapSQLite", "TapTestSupport"]),
        .testTarget(name: "TapCheckTests", dependencies: ["TapCheck", "TapReplay", "TapStore", "TapCore"]),
        .testTarget(name: "TapClientReplayTests", dependencies: ["TapClientReplay", "TapSandbox", "TapReplay", "TapIdentity", "TapRecording", "TapStore", "TapNet", "TapJOSE", "TapCore"]),
        .testTarget(name: "TapCLITests", dependencies: ["TapCore", "TapCrypto", "TapJOSE"]),
    ]
)
