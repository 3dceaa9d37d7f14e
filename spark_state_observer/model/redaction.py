"""Secrets out of any text that may name a URL: the one redactor for every message, log line and start line.

A location can carry a secret in many forms: ``user:password@`` or a bare ``token@`` before the host (not
in ``abfs://container@account``, where it names the container), a
query (``?token=``, Azure's ``?sig=``, a presigned ``X-Amz-Security-Token``), a fragment, and a client's
error can repeat an endpoint (``AWS_ENDPOINT_URL``) with its query. So every URL in the text loses its user
part, its query and its fragment, and any ``secret-looking-name=value`` left outside a URL loses its value.
The patterns are linear: bounded scheme, no nested quantifiers.
"""

from __future__ import annotations

import re

_SCHEME = r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://"
# a user part: with a password in any URL; without one except in Azure's, where it is the container
_USERINFO = re.compile(rf"({_SCHEME})[^\s/?#@:\"'<>]*:[^\s/?#@\"'<>]*@")
_USER = re.compile(rf"((?!(?:abfss?|wasbs?)://){_SCHEME})[^\s/?#@\"'<>]*@")
# a query or fragment, percent-encoded too (a client that took "?token=" for part of the key sends "%3Ftoken%3D")
# (the query is optional, so a URL without one matches as it is and the scan goes on after it: linear)
_QUERY = re.compile(rf"({_SCHEME}[^\s?#\"'<>%]*(?:%(?!3[fF]|23)[^\s?#\"'<>%]*)*)(?:(\?|#|%3[fF]|%23)(?!<redacted>)[^\s\"'<>]*)?")
_PARAM = re.compile(
    r"(?i)\b(x-amz-security-token|x-amz-signature|x-amz-credential|security[-_]?token|session[-_]?token|access[-_]?token"
    r"|client[-_]?secret|secret|password|passwd|token|signature|sig|api[-_]?key|key|code)(=|%3[dD])(?!<redacted>)[^\s&\"'#<>%]+"
)
REDACTED = "<redacted>"


def redact(text: str) -> str:
    """``text`` with every URL's user part, query and fragment, and every secret-named parameter's value removed."""
    text = _USER.sub(r"\1", _USERINFO.sub(r"\1", text))
    text = _QUERY.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}" if m[2] else m[0], text)
    return _PARAM.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", text)
