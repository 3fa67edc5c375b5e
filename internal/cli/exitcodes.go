package cli

// Exit codes. They are part of vacancyd's interface: scripts and service
// managers branch on them, so a code never changes meaning once released.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitConfigInvalid: the configuration has errors or cannot be read
	// (check-config, and run before it opens any listener).
	ExitConfigInvalid = 1
	// ExitUsage: unknown subcommand, unknown flag or bad flag value.
	ExitUsage = 2
	// ExitRuntime: the daemon or command failed while running (a listener
	// could not open, a server failed, randomness was unavailable).
	ExitRuntime = 3

	// Codes 40-49 are admin-request's outcomes (see adminrequest.go).

	// ExitUntrustedServer: the process serving the admin socket is not one
	// the command trusts (root, or an account owning both the socket and a
	// directory nobody else may write); nothing was sent.
	ExitUntrustedServer = 40
	// ExitRefused: the service refused the caller: the action needs an
	// administrator (administrator_required).
	ExitRefused = 41
	// ExitStaleRevision: save_settings named a revision other than the saved
	// one (stale_revision); read the settings again and redo the change.
	ExitStaleRevision = 42
	// ExitInvalidSettings: the settings document failed validation
	// (invalid_settings); every problem is printed.
	ExitInvalidSettings = 43
	// ExitNoService: no service could be reached: the socket is missing,
	// nothing listens on it, it cannot be opened, or this platform has no
	// admin channel in this build.
	ExitNoService = 44
	// ExitBadRequest: the request file cannot be read or is not exactly one
	// valid request (also when the service answers invalid_request,
	// unknown_action or unsupported_protocol_version).
	ExitBadRequest = 45
	// ExitDeclined: the Windows approval prompt was declined; nothing
	// changed.
	ExitDeclined = 46
	// ExitActionFailed: the service answered with another refusal
	// (not_found, not_available, internal) or the exchange broke off.
	ExitActionFailed = 47
)
