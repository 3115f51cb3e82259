"""mitmproxy addon: after `mitmdump -nr FILE.har`, writes what mitmproxy read as JSON lines to $HAR_FLOWS_OUT."""
import json
import os


class HarFlows:
    def __init__(self):
        self.flows = []

    def response(self, flow):
        self.flows.append({
            "method": flow.request.method,
            "url": flow.request.url,
            "status": flow.response.status_code if flow.response else None,
            "request_bytes": len(flow.request.raw_content or b""),
        })

    def done(self):
        with open(os.environ["HAR_FLOWS_OUT"], "w") as f:
            for fl in self.flows:
                f.write(json.dumps(fl) + "\n")


addons = [HarFlows()]
