// Package auth decides who may use a vacancyd listener: the API listener and
// every gate share one Authenticator, so every request is judged by the same
// rules.
//
// A request is admitted in one of three ways, recorded in its Principal: by a
// configured token that carries the scope the route needs, as a trusted
// direct loopback client (the workstation owner's local programs), or
// anonymously from the network when no token is configured and
// allow_unauthenticated_remote is set.
//
// Authorize applies its checks in this order, and the first that decides wins:
//
//  1. allowed_sources: a peer outside loopback whose address is not in the
//     allowlist gets 403 source_not_allowed; no credential is looked at.
//  2. Admin routes: any Origin header gets 403 browser_origin; a missing or
//     wrong X-Vacancyd-Admin: 1 gets 403 missing_intent. OPTIONS has no
//     exemption here or anywhere else.
//  3. Credential: a token presented in X-Api-Key or, when that header is
//     absent, in Authorization: Bearer, that matches a configured token
//     carrying the scope admits the request. A credential over 512 bytes is
//     never hashed and never matches.
//  4. Loopback trust (trust_loopback, peer in 127.0.0.0/8 or ::1): a direct
//     request may read and borrow, and on Linux and Windows do only the admin
//     actions marked LoopbackAllowed (pausing); on macOS every admin action.
//     Beyond that: 403 administrator_required, or 401 when the credential it
//     presented is unknown. A loopback request carrying a forwarding header, a
//     Host other than a loopback address or localhost with the listener's
//     port, Sec-Fetch-Site: cross-site or a non-local Origin is not direct: it
//     is judged like a remote request (outcome not_direct when it has no
//     credential), and with no token configured it gets 403.
//  5. Remote: with any token configured, 401 missing or invalid, or 403
//     forbidden for a token without the scope. With none, anonymous read and
//     borrow when allow_unauthenticated_remote is set; admin never.
//
// A presented credential that is unknown is ignored where no credential is
// needed (a trusted loopback read, an anonymous remote borrow): OpenAI-style
// clients always send some key, and an upstream with forward_authorization
// expects its own. Where a credential is needed, it answers 401 invalid_token.
//
// Tokens are held only as SHA-256 digests and each presented credential is
// compared with every digest in constant time. A value_file token is re-read
// at most once a second when its content changes; a file that becomes
// unreadable, empty or malformed disables only that token until it is good
// again. Every decision is counted in vacancyd_auth_total{scope,outcome}.
// Nothing here writes a CORS header.
package auth
