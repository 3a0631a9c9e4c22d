"""GET each URL given (from inside a network namespace, never through a proxy) and print one
JSON array: [{"status": HTTP status or 0, "body": parsed JSON or null, "error": text}, ...]."""
import json
import sys
import urllib.error
import urllib.request

opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
out = []
for url in sys.argv[1:]:
    try:
        with opener.open(url, timeout=1) as r:
            out.append({"status": r.status, "body": json.loads(r.read() or b"null")})
    except urllib.error.HTTPError as e:
        out.append({"status": e.code, "body": None, "error": str(e)})
    except Exception as e:  # refused, timeout, bad JSON: all "not there"
        out.append({"status": 0, "body": None, "error": str(e)})
print(json.dumps(out))
