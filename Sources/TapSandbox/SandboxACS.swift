import Foundation
import Synchronization
import TapCore
import TapCrypto
import TapEMV
import TapHTTP
import TapHTTPService
import TapJOSE
import TapNet

extension Sandbox {
    // MARK: ACS: challenge

    func handleChallenge(_ req: HTTPRequest, _ respond: @escaping (HTTPReply) -> Void) {
        let text = String(decoding: req.body, as: UTF8.self).trimmingWhitespace
        if text.hasPrefix("{") {
            // The SDK's own Erro, posted in clear to the acsURL.
            log("SDK Erro received: \(text.prefix(200))")
            return respond(HTTPReply(status: 200))
        }
        if text.split(separator: ".", omittingEmptySubsequences: false).count == 5 {
            return handleAppCReq(text, respond)
        }
        if let fields = FormBody.parse(text), let creq = fields.first(where: { $0.0 == "creq" })?.1 {
            return handleBrowserCReq(creq, sessionData: fields.first(where: { $0.0 == "threeDSSessionData" })?.1, respond)
        }
        respond(erroReply(.messageInvalid, "A", "Message not recognised", "expected a CReq (JWE, or form field creq)", about: nil, type: nil))
    }

    func handleAppCReq(_ compact: String, _ respond: @escaping (HTTPReply) -> Void) {
        guard let jwe = try? JWE(compact: compact), let kid = jwe.keyID else {
            return respond(erroReply(.decryptionFailure, "A", "Data decryption failure", "CReq JWE is malformed or has no kid",
                                     about: nil, type: .cReq))
        }
        guard let tx = transactions[kid], tx.app, var cipher = tx.cipher else {
            return respond(erroReply(.transactionIDNotRecognised, "A", "Transaction ID not recognised",
                                     "acsTransID \(kid) (the JWE kid) is not a transaction of this ACS",
                                     about: .object(MessageIDs(acsTransID: .string(kid)).members), type: .cReq))
        }
        if tx.card.behaviour == .acsNeverAnswers {
            log("CReq for \(kid): this test card's ACS never answers")
            return
        }
        let creq: JSON
        do {
            creq = try cipher.openRequest(compact)
            tx.cipher = cipher
        } catch {
            return respond(erroReply(error.code, "A", error.code == .decryptionFailure ? "Data decryption failure" : "Message invalid",
                                     error.message, about: tx.ares, type: .cReq))
        }
        guard creq.messageKind == .cReq else {
            return respond(erroReply(.messageInvalid, "A", "Message not recognised", "messageType \(creq[.messageType]?.compact ?? "missing")",
                                     about: tx.ares, type: nil))
        }
        guard creq.messageVersion == tx.version else {
            return respond(erroReply(.formatInvalid, "A", "Format or value invalid", "messageVersion differs from the ARes",
                                     about: tx.ares, type: .cReq))
        }
        let missing = EMV.missing([.id(.threeDSServerTransID), .id(.acsTransID), .id(.sdkTransID)], in: creq)
        guard missing.isEmpty else {
            return respond(erroReply(.requiredElementMissing, "A", "Required element missing", EMV.names(missing), about: tx.ares, type: .cReq))
        }
        guard creq[.threeDSServerTransID] == tx.ares[.threeDSServerTransID], creq[.sdkTransID] == tx.ares[.sdkTransID] else {
            return respond(erroReply(.transactionIDNotRecognised, "A", "Transaction ID not recognised", "threeDSServerTransID or sdkTransID",
                                     about: tx.ares, type: .cReq))
        }
        let cres: JSON
        switch step(tx, creq) {
        case let .ui(message): cres = message
        case let .final(status, reason, cancel):
            cres = finalCRes(tx, status: status)
            tx.finished = true
            scheduleRReq(after: 0.05, tx, status: status, cancel: cancel, reason: reason)
        }
        do {
            let sealed = try cipher.seal(cres)
            tx.cipher = cipher
            respond(HTTPReply(status: 200, headers: [("Content-Type", "application/jose; charset=UTF-8")], body: Array(sealed.utf8)))
        } catch {
            respond(erroReply(.decryptionFailure, "A", "Data decryption failure", error.message, about: tx.ares, type: .cReq))
        }
    }

    enum Step {
        case ui(JSON)
        case final(status: TransStatus, reason: String?, cancel: String?)
    }

    /// The challenge state machine shared by both channels.
    func step(_ tx: Transaction, _ creq: JSON) -> Step {
        tx.rounds += 1
        if let cancel = creq[.challengeCancel]?.stringValue { return .final(status: .notAuthenticated, reason: "01", cancel: cancel) }
        if tx.rounds == 1, !hasEntry(creq) { return .ui(uiCRes(tx, note: nil)) }
        if YesNoIndicator(creq[.resendChallenge]) == .yes {
            tx.resends += 1
            return .ui(uiCRes(tx, note: "A new code was sent (\(tx.resends))."))
        }
        return passes(tx.uiType, creq) ? .final(status: .authenticated, reason: nil, cancel: nil)
            : .final(status: .notAuthenticated, reason: "01", cancel: nil)
    }

    func hasEntry(_ c: JSON) -> Bool {
        [EMVField.challengeDataEntry, .challengeHTMLDataEntry, .oobContinue, .infoContinueIndicator, .challengeNoEntry].contains { c[$0] != nil }
    }

    func passes(_ uiType: ACSUIType, _ c: JSON) -> Bool {
        let entry = c[.challengeDataEntry]?.stringValue
        switch uiType {
        case .text: return entry == TestCard.otp
        case .singleSelect: return entry == TestCard.singleSelectAnswer
        case .multiSelect: return Set((entry ?? "").split(separator: ",").map { String($0).trimmingWhitespace }) == ["1", "3"]
        case .oob, .htmlOOB:
            return OOBContinue.continues(c[.oobContinue])
        case .html: return (c[.challengeHTMLDataEntry]?.stringValue ?? "").contains(TestCard.otp)
        case .information: return InfoContinueIndicator(c[.infoContinueIndicator]) == .continued || YesNoIndicator(c[.challengeNoEntry]) == .yes
        default: return false
        }
    }

    /// The IDs a CRes carries: the ARes's, sdkTransID on the app channel only.
    func cresIDs(_ tx: Transaction) -> MessageIDs {
        MessageIDs(of: tx.ares, tx.app ? [.threeDSServerTransID, .acsTransID, .sdkTransID] : [.threeDSServerTransID, .acsTransID])
    }

    func uiCRes(_ tx: Transaction, note: String?) -> JSON {
        var c = ThreeDSMessage.ChallengeCRes(ids: cresIDs(tx), version: tx.version, acsUiType: tx.uiType)
        c.challengeInfoHeader = "3dstape Sandbox Bank"
        c.psImage = .object([("medium", .string(baseURL + "/img/ps.png"))])
        let info = note.map { " " + $0 } ?? ""
        switch tx.uiType {
        case .text:
            c.challengeInfoText = "Enter the code sent to your phone (the sandbox code is \(TestCard.otp)).\(info)"
            c.challengeInfoLabel = "Code"
            c.submitAuthenticationLabel = "Submit"
            c.resendInformationLabel = "Send a new code"
        case .singleSelect:
            c.challengeInfoText = "Where should we send your code? (choose 2)\(info)"
            c.challengeSelectInfo = .array([.object([("1", .string("Mobile **** 321"))]), .object([("2", .string("Email a***@example.test"))])])
            c.submitAuthenticationLabel = "Next"
        case .multiSelect:
            c.challengeInfoText = "Which of these did you buy? (choose 1 and 3)\(info)"
            c.challengeSelectInfo = .array([.object([("1", .string("Coffee"))]), .object([("2", .string("Train ticket"))]), .object([("3", .string("Books"))])])
            c.submitAuthenticationLabel = "Confirm"
        case .oob:
            c.challengeInfoText = "Approve the payment in your banking app, then continue.\(info)"
            c.oobContinueLabel = "Continue"
        case .html:
            let html = "<html><body><form action=\"HTTPS://EMV3DS/challenge\"><p>Enter \(TestCard.otp)</p><input name=\"otp\"><button>Submit</button></form></body></html>"
            c.acsHTML = Base64URL.encode(Array(html.utf8))
        case .htmlOOB:
            let html = "<html><body><p>Approve in your banking app.</p><form action=\"HTTPS://EMV3DS/challenge\"><button>Continue</button></form></body></html>"
            c.acsHTML = Base64URL.encode(Array(html.utf8))
            c.oobContinueLabel = "Continue"
        case .information:
            c.challengeInfoText = "Your card ending 1125 is being used for a payment of EUR 12.34.\(info)"
            c.submitAuthenticationLabel = "Continue"
        default: break
        }
        c.whyInfoLabel = "Why am I seeing this?"
        c.whyInfoText = "The sandbox asks for a challenge for this test card."
        return c.json
    }

    func finalCRes(_ tx: Transaction, status: TransStatus) -> JSON {
        ThreeDSMessage.finalCRes(ids: cresIDs(tx), version: tx.version, transStatus: status)
    }

    // MARK: ACS: browser

    func handleBrowserCReq(_ value: String, sessionData: String?, _ respond: @escaping (HTTPReply) -> Void) {
        guard let bytes = Base64URL.decode(value.trimmingWhitespace), let creq = try? JSON.parse(bytes), creq.isObject else {
            return respond(erroReply(.messageInvalid, "A", "Message not recognised", "creq is not base64url JSON", about: nil, type: .cReq))
        }
        guard let id = creq[.acsTransID]?.stringValue, let tx = transactions[id], !tx.app else {
            return respond(erroReply(.transactionIDNotRecognised, "A", "Transaction ID not recognised",
                                     "acsTransID \(creq[.acsTransID]?.compact ?? "missing")", about: creq, type: .cReq))
        }
        let missing = EMV.missing([.id(.threeDSServerTransID), .field(.messageType), .field(.messageVersion), .field(.challengeWindowSize)], in: creq)
        guard missing.isEmpty else {
            return respond(erroReply(.requiredElementMissing, "A", "Required element missing", EMV.names(missing), about: creq, type: .cReq))
        }
        if tx.card.behaviour == .acsNeverAnswers { return }
        tx.sessionData = sessionData
        let prompt: String
        switch tx.uiType {
        case .singleSelect: prompt = "Where should we send your code? 1: mobile, 2: email (choose 2)"
        case .multiSelect: prompt = "Which did you buy? 1: coffee, 2: train ticket, 3: books (choose 1 and 3)"
        case .oob, .htmlOOB: prompt = "Approve the payment in your banking app, then continue"
        case .information: prompt = "A payment of EUR 12.34 is being made with your card"
        default: prompt = "Enter the code sent to your phone (the sandbox code is \(TestCard.otp))"
        }
        respond(.html("""
        <!DOCTYPE html><html><head><title>3dstape Sandbox Bank</title></head><body>
        <h1>3dstape Sandbox Bank</h1><p>\(HTMLEscape.text(prompt))</p>
        <form method="post" action="\(HTMLEscape.url(baseURL + "/acs/challenge/submit"))">
        <input type="hidden" name="acsTransID" value="\(HTMLEscape.attribute(id))">
        <input type="hidden" name="uiType" value="\(HTMLEscape.attribute(tx.uiType.wire))">
        <input type="text" name="answer" value="">
        <button type="submit" name="action" value="submit">Submit</button>
        <button type="submit" name="action" value="cancel">Cancel</button>
        </form></body></html>
        """))
    }

    func handleBrowserSubmit(_ body: [UInt8], _ respond: @escaping (HTTPReply) -> Void) {
        let fields = FormBody.parse(String(decoding: body, as: UTF8.self)) ?? []
        func field(_ n: String) -> String? { fields.first { $0.0 == n }?.1 }
        guard let id = field("acsTransID"), let tx = transactions[id], !tx.app, !tx.finished else {
            return respond(.html("<p>Unknown or finished transaction</p>", status: 400))
        }
        let answer = field("answer") ?? ""
        var entries: [ThreeDSMessage.ChallengeEntry] = []
        if field("action") == "cancel" { entries.append(.cancel("01")) }
        switch tx.uiType {
        case .oob, .htmlOOB: if answer == "oob" { entries.append(.oobContinue(.bool(true))) }
        case .html: entries.append(.htmlDataEntry(answer))
        case .information: entries.append(.infoContinue)
        default: entries.append(.dataEntry(answer))
        }
        tx.rounds = max(tx.rounds, 1)
        // The form's answer as the challenge state machine reads a CReq (only the entries matter to it).
        let creq = JSON.object(entries.map(\.member))
        guard case let .final(status, reason, cancel) = step(tx, creq) else {
            return respond(.html("<p>Try again</p>"))
        }
        tx.finished = true
        let cres = finalCRes(tx, status: status)
        var post: [(String, String)] = [("cres", Base64URL.encode(cres.bytes))]
        if let s = tx.sessionData { post.append(("threeDSSessionData", s)) }
        let notify = tx.areq[.notificationURL]?.stringValue ?? ""
        scheduleRReq(after: 0.05, tx, status: status, cancel: cancel, reason: reason)
        respond(.html(HTMLForm.autoPost(action: notify, fields: post, title: "Returning to the merchant")))
    }

    // MARK: RReq

    /// Sends the RReq for a finished challenge (or decoupled authentication) `seconds` from now; it counts as due
    /// (`rreqsDue`) from now on.
    func scheduleRReq(after seconds: Double, _ tx: Transaction, status: TransStatus, cancel: String?, reason: String? = nil) {
        rreqsDue.begin()
        let due = rreqsDue
        loop.schedule(after: seconds) { [weak self] in
            guard let self else { return due.end() }
            self.finish(tx, status: status, cancel: cancel, reason: reason)
        }
    }

    /// Sends the RReq for a finished challenge (or decoupled authentication) to the 3DS Server; it stops being due
    /// (`rreqsDue`) once its RRes, or why there is none, is in.
    func finish(_ tx: Transaction, status: TransStatus, cancel: String?, reason: String? = nil) {
        let due = rreqsDue
        guard let url = tx.areq[.threeDSServerURL]?.stringValue.flatMap(HTTPURL.init) else {
            log("no usable threeDSServerURL; RReq not sent")
            return due.end()
        }
        let fromV22App = tx.app && tx.version >= .v2_2
        var r = ThreeDSMessage.RReq(ids: MessageIDs(of: tx.ares, fromV22App ? TransactionIDField.allCases : [.threeDSServerTransID, .dsTransID, .acsTransID]),
                                    version: tx.version, messageCategory: MessageCategory(tx.areq[.messageCategory]) ?? .payment,
                                    transStatus: status, eci: status == .authenticated ? "05" : "07", authenticationType: "02",
                                    interactionCounter: String(format: "%02d", max(1, tx.rounds)))
        if status == .authenticated { r.authenticationValue = Sandbox.cavv() }
        r.transStatusReason = reason
        r.challengeCancel = cancel
        if fromV22App { r.acsRenderingType = tx.ares[.acsRenderingType] }
        transactions[tx.ares[.acsTransID]?.stringValue ?? ""] = nil
        let sender: RReqSender
        do {
            sender = try rreqSender()
        } catch {
            log("RReq \(status) → \(url): not sent: no TLS context: \(error)")
            return due.end()
        }
        let log = self.log
        sender.send(r.json.bytes, to: url) { result in
            log("RReq \(status) → \(url): RRes \(RReqSender.outcome(result))")
            due.end()
        }
    }

    /// The sender every RReq goes through, made on first use on the loop thread (its TLS context loads the system trust
    /// store: about 100 ms, which per RReq held RReqs back by seconds under load).
    func rreqSender() throws -> RReqSender {
        if let rreqs { return rreqs }
        let sender = RReqSender(loop: loop, tls: try TLSContext(clientRoots: options.outgoingRoots), proxy: options.outgoingProxy)
        rreqs = sender
        return sender
    }
}
