package adminsock

// The Windows admin pipe's decisions, kept free of Windows calls so that
// they are unit-tested on every platform: the pipe's security descriptor,
// who counts as an administrator, and whether a client may trust the
// process serving the pipe. pipe_windows.go gathers the facts from the
// kernel and the service control manager and hands them to these.

import (
	"fmt"
	"strings"

	"github.com/vacancyd/vacancyd/internal/admin"
)

// PipeName is the Windows admin pipe. It is fixed: the service and its
// clients agree on it without configuration (server.admin_socket is the
// Linux socket's path and means nothing on Windows).
const PipeName = `\\.\pipe\vacancyd-admin`

// ServiceName is the vacancyd service's name in the Windows service control
// manager. A pipe client trusts the pipe only when the process serving it is
// this service's running process.
const ServiceName = "vacancyd"

// Well-known SIDs the decisions name.
const (
	sidLocalSystem    = "S-1-5-18"
	sidAdministrators = "S-1-5-32-544"
)

// Access rights, as winnt.h defines them. They are spelled out here rather
// than taken from x/sys/windows so that this file builds, and its tests run,
// everywhere.
const (
	accessFileReadData        = 0x0001
	accessFileWriteData       = 0x0002
	accessFileCreatePipeInst  = 0x0004 // FILE_APPEND_DATA on files
	accessFileReadEA          = 0x0008
	accessFileWriteEA         = 0x0010
	accessFileReadAttributes  = 0x0080
	accessFileWriteAttributes = 0x0100
	accessReadControl         = 0x00020000
	accessSynchronize         = 0x00100000

	// pipeClientAccess is what the pipe grants a signed-in user: read and
	// write the pipe, read and set its attributes (a client may set its own
	// end's read mode), and wait on it. It is FILE_GENERIC_READ |
	// FILE_GENERIC_WRITE less FILE_CREATE_PIPE_INSTANCE, which would let
	// any user add a server instance of the pipe and answer other users'
	// requests in the service's name.
	pipeClientAccess = accessFileReadData | accessFileWriteData | accessFileReadEA | accessFileWriteEA |
		accessFileReadAttributes | accessFileWriteAttributes | accessReadControl | accessSynchronize
)

// pipeSDDL is the admin pipe's security descriptor, in SDDL:
//
//	D:P                 a protected DACL (nothing inherited), in this order:
//	(D;;GA;;;NU)        deny everything to network logons (S-1-5-2), so a
//	                    remote or SMB session is refused even when it is an
//	                    administrator's (the pipe also rejects remote clients);
//	(A;;GA;;;SY)        LocalSystem: full control;
//	(A;;GA;;;BA)        Administrators (elevated tokens only, since UAC
//	                    makes the group deny-only in a filtered token): full
//	                    control;
//	(A;;GA;;;<service>) the service's own account, only when it runs as
//	                    another account than LocalSystem (a developer's
//	                    console), which needs to create the pipe's
//	                    instances;
//	(A;;0x12019b;;;IU)  Interactive users (S-1-5-4: console and remote
//	                    desktop sign-ins): connect, read and write, but
//	                    not create pipe instances (see pipeClientAccess).
//
// No owner or group is given, so they are the creating token's defaults.
// There is no mandatory label either: an object without one is treated as
// medium integrity with no-write-up, which keeps low-integrity processes
// (browser sandboxes) out, and no AppContainer SID is granted anything.
// Anyone else (services under other accounts, anonymous logons, batch
// jobs) gets nothing. Connecting grants nothing by itself: every request is
// judged from the token of the account that wrote it.
func pipeSDDL(serviceSID string) string {
	var b strings.Builder
	b.WriteString("D:P(D;;GA;;;NU)(A;;GA;;;SY)(A;;GA;;;BA)")
	if serviceSID != "" && serviceSID != sidLocalSystem && serviceSID != sidAdministrators {
		fmt.Fprintf(&b, "(A;;GA;;;%s)", serviceSID)
	}
	fmt.Fprintf(&b, "(A;;0x%x;;;IU)", pipeClientAccess)
	return b.String()
}

// stagedFileSDDL is the security descriptor of a request file staged for an
// elevated admin-request: a protected DACL giving full control to
// LocalSystem, Administrators and the signed-in account that staged it, and
// nothing to anyone else (nor does it inherit from the directory).
func stagedFileSDDL(userSID string) string {
	var b strings.Builder
	b.WriteString("D:P(A;;FA;;;SY)(A;;FA;;;BA)")
	if userSID != "" && userSID != sidLocalSystem && userSID != sidAdministrators {
		fmt.Fprintf(&b, "(A;;FA;;;%s)", userSID)
	}
	return b.String()
}

// tokenFacts is what the service read from the Windows token of the account
// that wrote a request to the pipe (identification level: the service can
// read the token but never act as the account).
type tokenFacts struct {
	// sid is the token's user SID, as a string ("S-1-5-21-...").
	sid string
	// elevated is TokenElevation's TokenIsElevated.
	elevated bool
	// inAdministrators is CheckTokenMembership for BUILTIN\Administrators:
	// true only when the group is enabled in the token, which UAC's
	// filtered (unelevated) token never has.
	inAdministrators bool
	// isSystem is the user SID being LocalSystem (S-1-5-18).
	isSystem bool
	// pid is the client process id the pipe reported, for logs only: it
	// decides nothing, since a process id can be reused.
	pid uint32
}

// decideWindowsCaller names the pipe's caller and decides whether it is an
// administrator, saying why in words for the log. An administrator is
// LocalSystem, or a token that is both elevated and an enabled member of
// BUILTIN\Administrators: an administrator's everyday, unelevated programs
// under UAC do not count, and neither does an elevated token of an account
// outside the group. The account is the user SID, which the service
// remembers as who paused.
func decideWindowsCaller(f tokenFacts) (admin.Caller, string) {
	c := admin.Caller{Account: f.sid, Via: "pipe"}
	switch {
	case f.sid == "":
		return admin.Caller{Via: "pipe"}, "the token names no account"
	case f.isSystem || f.sid == sidLocalSystem:
		c.Administrator = true
		return c, "LocalSystem"
	case f.elevated && f.inAdministrators:
		c.Administrator = true
		return c, "an elevated member of Administrators"
	case f.inAdministrators:
		// Not reachable through UAC, which disables the group in the
		// filtered token, but a token with UAC off or a crafted one
		// may hold the group without being elevated.
		return c, "a member of Administrators, but the token is not elevated"
	case f.elevated:
		return c, "elevated, but not a member of Administrators"
	}
	return c, "a standard account (run it elevated to administer)"
}

// pipeServerFacts is what a client learned about who serves the pipe it
// connected to, before sending anything.
type pipeServerFacts struct {
	// serverPID is GetNamedPipeServerProcessId's answer; 0 when unknown.
	serverPID uint32
	// serviceErr is why the service control manager could not say how the
	// vacancyd service runs (not installed, access refused), or nil.
	serviceErr error
	// serviceState is the service's state (serviceRunning when running).
	serviceState uint32
	// servicePID is the service's process id; 0 when it is not running.
	servicePID uint32
}

// serviceRunning is SERVICE_RUNNING.
const serviceRunning = 4

// pipeServerUntrusted says why the process serving the pipe cannot be
// trusted with a request, or "" when it can: it must be the running
// vacancyd service's own process, as the service control manager reports
// it. Only a process the service control manager started as the vacancyd
// service qualifies; another process that took the pipe's name first
// (squatting it while the service was stopped or restarting) does not,
// whatever account it runs as.
func pipeServerUntrusted(f pipeServerFacts) string {
	switch {
	case f.serverPID == 0:
		return "the system did not say which process serves the pipe"
	case f.serviceErr != nil:
		return fmt.Sprintf("the %s service cannot be queried (%v), so process %d cannot be shown to be it", ServiceName, f.serviceErr, f.serverPID)
	case f.serviceState != serviceRunning || f.servicePID == 0:
		return fmt.Sprintf("the %s service is not running (state %s), so process %d is not it", ServiceName, serviceStateName(f.serviceState), f.serverPID)
	case f.serverPID != f.servicePID:
		return fmt.Sprintf("process %d serves the pipe, but the %s service runs as process %d", f.serverPID, ServiceName, f.servicePID)
	}
	return ""
}

// serviceStateName names a SERVICE_STATUS dwCurrentState for messages.
func serviceStateName(s uint32) string {
	switch s {
	case 1:
		return "stopped"
	case 2:
		return "start pending"
	case 3:
		return "stop pending"
	case 4:
		return "running"
	case 5:
		return "continue pending"
	case 6:
		return "pause pending"
	case 7:
		return "paused"
	}
	return fmt.Sprintf("%d", s)
}

// PipeUntrustedError is a pipe client's refusal of the process serving the
// pipe: it is not the running vacancyd service. Nothing was sent to it.
type PipeUntrustedError struct {
	Pipe string
	// PID is the serving process's id (0 when the system would not say).
	PID    uint32
	Reason string
}

func (e *PipeUntrustedError) Error() string {
	return fmt.Sprintf("adminsock: %s is not served by the %s service: %s", e.Pipe, ServiceName, e.Reason)
}
