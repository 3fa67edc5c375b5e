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

	// Codes 40-49 are reserved for admin-request outcomes, e.g. 40 when the
	// process serving the admin socket is not the trusted vacancyd service,
	// then the service refusing the request, a stale settings revision,
	// invalid settings and no service listening.
)
