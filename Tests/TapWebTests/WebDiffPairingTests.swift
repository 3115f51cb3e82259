import Foundation
import Testing
import TapCore
import TapSQLite
@testable import TapWeb

/// `/api/diff` pairs a replay with the recording it names by what it matched (issue 24 item 8), as `3dstape diff` does,
/// and takes `pair_by=match|shape`.
@Suite struct WebDiffPairingTests {
    @Test func aReplayOfTheServedRecordingIsPairedByItsMatches() throws {
        let f = try WebFixture()
        defer { f.remove() }
        // A replay of demo-browser whose first request (the frictionless AReq) missed: every other exchange matched itself.
        let recording = f.dir.appendingPathComponent("demo-browser.3dstape").path
        let replay = f.dir.appendingPathComponent("browser-replay.3dstape").path
        try FileManager.default.copyItem(atPath: recording, toPath: replay)
        let db = try Database(path: replay)
        try db.execute("INSERT INTO replay_matches SELECT id, CASE WHEN id = 1 THEN NULL ELSE id END, 'test', CASE WHEN id = 1 THEN 'no match' END, 0, 0, NULL "
                       + "FROM exchanges; INSERT OR REPLACE INTO meta VALUES ('mode', 'replay'), ('replayed_session', '\(recording)')")
        let api = WebAPI(catalog: try SessionCatalog(paths: [f.dir.path]))
        let (status, byMatch) = WebFixture.get(api, "/api/diff?a=demo-browser.3dstape&b=browser-replay.3dstape")
        #expect(status == 200 && byMatch["pair_by"]?.stringValue == "match" && byMatch["paired"]?.numberValue == "3"
                && byMatch["not_replayed_a"]?.numberValue == "1", "\(byMatch.compact)")
        #expect(byMatch["changes"]?.arrayValue?.map { $0["kind"]?.stringValue } == ["extra-transaction"], "the missed AReq is extra")
        let (_, byShape) = WebFixture.get(api, "/api/diff?a=demo-browser.3dstape&b=browser-replay.3dstape&pair_by=shape")
        #expect(byShape["pair_by"]?.stringValue == "shape" && byShape["paired"]?.numberValue == "4" && byShape["changes"]?.arrayValue?.isEmpty == true)
        let (_, unrelated) = WebFixture.get(api, "/api/diff?a=demo-app.3dstape&b=demo-browser.3dstape")
        #expect(unrelated["pair_by"]?.stringValue == "shape", "not a replay: by shape")
        #expect(WebFixture.get(api, "/api/diff?a=demo-app.3dstape&b=demo-browser.3dstape&pair_by=match").0 == 400)
        #expect(WebFixture.get(api, "/api/diff?a=demo-browser.3dstape&b=browser-replay.3dstape&pair_by=order").0 == 400)
    }
}
