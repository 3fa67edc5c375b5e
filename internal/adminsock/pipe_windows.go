//go:build windows

package adminsock

// The Windows admin pipe's kernel calls. The pipe itself is go-winio's
// (github.com/Microsoft/go-winio, as Docker and containerd use): it creates
// the first instance with FILE_CREATE, so that ListenPipe fails when the
// name exists already (the same effect as FILE_FLAG_FIRST_PIPE_INSTANCE),
// applies the security descriptor, sets PIPE_REJECT_REMOTE_CLIENTS, and does
// overlapped I/O with deadlines.
//
// Identifying the caller. After reading the request, the service calls
// ImpersonateNamedPipeClient on a locked OS thread, opens that thread's
// token for TOKEN_QUERY (as itself, since the token is only at
// identification level), reverts, and reads the token: user SID,
// TokenElevation, and CheckTokenMembership for BUILTIN\Administrators. This
// is the token of the account that opened the pipe and wrote the request,
// as the kernel captured it; nothing the client sends changes it. It is
// preferred to GetNamedPipeClientProcessId + OpenProcessToken, which would
// read some process's token by a process id that can be reused, and that
// the client could make name another process by handing its pipe handle
// over. Clients dial with SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION,
// so the service can read the token but never act as the account.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"
	"unsafe"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// pipeBufferSize is the pipe's in and out buffer size: a request or answer
// of ordinary size fits, so neither side waits on the other to write it.
const pipeBufferSize = 64 << 10

// pipeDialTimeout bounds waiting for a free pipe instance.
const pipeDialTimeout = 10 * time.Second

var (
	modadvapi32                    = windows.NewLazySystemDLL("advapi32.dll")
	procImpersonateNamedPipeClient = modadvapi32.NewProc("ImpersonateNamedPipeClient")
)

func impersonateNamedPipeClient(h windows.Handle) error {
	r, _, e := procImpersonateNamedPipeClient.Call(uintptr(h))
	if r == 0 {
		if e == nil || e == windows.ERROR_SUCCESS {
			return windows.ERROR_ACCESS_DENIED
		}
		return e
	}
	return nil
}

func listenPipe(o Options) (*PipeListener, error) {
	self, err := processSID()
	if err != nil {
		return nil, fmt.Errorf("adminsock: read the service's own account: %w", err)
	}
	ln, err := winio.ListenPipe(PipeName, &winio.PipeConfig{
		SecurityDescriptor: pipeSDDL(self),
		MessageMode:        true,
		InputBufferSize:    pipeBufferSize,
		OutputBufferSize:   pipeBufferSize,
	})
	if err != nil {
		if errors.Is(err, windows.ERROR_ALREADY_EXISTS) || errors.Is(err, windows.ERROR_ACCESS_DENIED) ||
			errors.Is(err, windows.ERROR_PIPE_BUSY) {
			return nil, fmt.Errorf("adminsock: %s: %w (%v); refusing to share it", PipeName, ErrPipeInUse, err)
		}
		return nil, fmt.Errorf("adminsock: create %s: %w", PipeName, err)
	}
	return newPipeListener(o, ln, identifyPipeClient), nil
}

// processSID is this process's user SID as a string.
func processSID() (string, error) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return "", err
	}
	return u.User.Sid.String(), nil
}

// handleOf returns the pipe handle under a go-winio connection.
func handleOf(c net.Conn) (windows.Handle, error) {
	f, ok := c.(interface{ Fd() uintptr })
	if !ok {
		return 0, fmt.Errorf("adminsock: %T is not a pipe", c)
	}
	return windows.Handle(f.Fd()), nil
}

// identifyPipeClient reads the token of the account that wrote to c. See
// the file comment.
func identifyPipeClient(c net.Conn) (tokenFacts, error) {
	h, err := handleOf(c)
	if err != nil {
		return tokenFacts{}, err
	}
	var pid uint32
	_ = windows.GetNamedPipeClientProcessId(h, &pid) // for logs only

	type result struct {
		tok windows.Token
		err error
	}
	ch := make(chan result, 1)
	// A goroutine of its own, so that if reverting fails the impersonating
	// thread is never handed back to the scheduler: a goroutine that exits
	// while locked to its thread takes the thread with it.
	go func() {
		runtime.LockOSThread()
		if err := impersonateNamedPipeClient(h); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("ImpersonateNamedPipeClient: %w", err)}
			return
		}
		var tok windows.Token
		oerr := windows.OpenThreadToken(windows.CurrentThread(), windows.TOKEN_QUERY, true, &tok)
		if rerr := windows.RevertToSelf(); rerr != nil {
			if oerr == nil {
				tok.Close()
			}
			ch <- result{err: fmt.Errorf("RevertToSelf: %w", rerr)}
			return // still locked: the thread ends with this goroutine
		}
		runtime.UnlockOSThread()
		if oerr != nil {
			ch <- result{err: fmt.Errorf("OpenThreadToken: %w", oerr)}
			return
		}
		ch <- result{tok: tok}
	}()
	r := <-ch
	if r.err != nil {
		return tokenFacts{pid: pid}, r.err
	}
	defer r.tok.Close()
	f, err := readTokenFacts(r.tok)
	f.pid = pid
	return f, err
}

// readTokenFacts reads what decideWindowsCaller needs from a token. Only the
// user SID is required; a failure to read elevation or membership leaves
// that fact false, which can only make the caller a standard account.
func readTokenFacts(tok windows.Token) (tokenFacts, error) {
	u, err := tok.GetTokenUser()
	if err != nil {
		return tokenFacts{}, fmt.Errorf("read the token's user: %w", err)
	}
	f := tokenFacts{
		sid:      u.User.Sid.String(),
		isSystem: u.User.Sid.IsWellKnown(windows.WinLocalSystemSid),
	}
	var elevation uint32
	var n uint32
	if err := windows.GetTokenInformation(tok, windows.TokenElevation, (*byte)(unsafe.Pointer(&elevation)), uint32(unsafe.Sizeof(elevation)), &n); err == nil && n == uint32(unsafe.Sizeof(elevation)) {
		f.elevated = elevation != 0
	}
	admins, err := windows.CreateWellKnownSid(windows.WinBuiltinAdministratorsSid)
	if err == nil {
		f.inAdministrators, _ = tok.IsMember(admins)
	}
	return f, nil
}

// pipeClientDesiredAccess is what a client asks for when it opens the pipe:
// within what pipeSDDL grants interactive users.
const pipeClientDesiredAccess = windows.GENERIC_READ | windows.FILE_WRITE_DATA | windows.FILE_WRITE_ATTRIBUTES

// DialPipe connects to the admin pipe at identification level and checks,
// before anything is sent, that the process serving it is the running
// vacancyd service: GetNamedPipeServerProcessId must equal the process id
// the service control manager reports for ServiceName. Otherwise it closes
// the connection and returns *PipeUntrustedError. A pipe that does not
// exist is ErrNoService.
func DialPipe(ctx context.Context) (*PipeConn, error) {
	dctx, cancel := context.WithTimeout(ctx, pipeDialTimeout)
	defer cancel()
	c, err := winio.DialPipeAccessImpLevel(dctx, PipeName, pipeClientDesiredAccess, winio.PipeImpLevelIdentification)
	if err != nil {
		switch {
		case errors.Is(err, windows.ERROR_FILE_NOT_FOUND), errors.Is(err, windows.ERROR_PATH_NOT_FOUND):
			return nil, fmt.Errorf("%w (%s does not exist)", ErrNoService, PipeName)
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return nil, fmt.Errorf("%w (%s stayed busy for %s)", ErrNoService, PipeName, pipeDialTimeout)
		}
		return nil, fmt.Errorf("adminsock: open %s: %w", PipeName, err)
	}
	h, err := handleOf(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	var f pipeServerFacts
	if err := windows.GetNamedPipeServerProcessId(h, &f.serverPID); err != nil {
		f.serverPID = 0
	}
	f.serviceState, f.servicePID, f.serviceErr = queryService(ServiceName)
	if reason := pipeServerUntrusted(f); reason != "" {
		c.Close()
		return nil, &PipeUntrustedError{Pipe: PipeName, PID: f.serverPID, Reason: reason}
	}
	return &PipeConn{conn: c, ServerPID: f.serverPID}, nil
}

// queryService asks the service control manager for a service's state and
// process id. Interactive users may query a service's status by default.
func queryService(name string) (state, pid uint32, err error) {
	m, err := windows.OpenSCManager(nil, nil, windows.SC_MANAGER_CONNECT)
	if err != nil {
		return 0, 0, fmt.Errorf("open the service control manager: %w", err)
	}
	defer windows.CloseServiceHandle(m)
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return 0, 0, err
	}
	s, err := windows.OpenService(m, n, windows.SERVICE_QUERY_STATUS)
	if err != nil {
		return 0, 0, fmt.Errorf("open service %q: %w", name, err)
	}
	defer windows.CloseServiceHandle(s)
	var st windows.SERVICE_STATUS_PROCESS
	var need uint32
	if err := windows.QueryServiceStatusEx(s, windows.SC_STATUS_PROCESS_INFO, (*byte)(unsafe.Pointer(&st)), uint32(unsafe.Sizeof(st)), &need); err != nil {
		return 0, 0, fmt.Errorf("query service %q: %w", name, err)
	}
	return st.CurrentState, st.ProcessId, nil
}

func dialChannel(ctx context.Context, _ string) (Channel, error) {
	c, err := DialPipe(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}
