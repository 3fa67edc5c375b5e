//go:build windows

package adminsock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	modshell32          = windows.NewLazySystemDLL("shell32.dll")
	procShellExecuteExW = modshell32.NewProc("ShellExecuteExW")
)

// shellExecuteInfo is SHELLEXECUTEINFOW; Go lays it out as C does on both
// 386 and amd64 (60 and 112 bytes).
type shellExecuteInfo struct {
	cbSize         uint32
	fMask          uint32
	hwnd           uintptr
	lpVerb         *uint16
	lpFile         *uint16
	lpParameters   *uint16
	lpDirectory    *uint16
	nShow          int32
	hInstApp       uintptr
	lpIDList       uintptr
	lpClass        *uint16
	hkeyClass      uintptr
	dwHotKey       uint32
	hIconOrMonitor uintptr
	hProcess       windows.Handle
}

const (
	seeMaskNoCloseProcess = 0x00000040
	seeMaskNoAsync        = 0x00000100
	seeMaskFlagNoUI       = 0x00000400

	sFalse = 1 // S_FALSE
)

// elevatedPollInterval is how often RunElevated looks at ctx while the
// elevated run goes on.
const elevatedPollInterval = 250 * time.Millisecond

// RunElevated sends request through the Windows approval prompt: it stages
// the request in a file readable only by the signed-in account,
// Administrators and LocalSystem (stagedFileSDDL, in a new directory under
// the account's temporary directory), runs `<exe> admin-request --request
// <file>` elevated (ShellExecuteEx with the "runas" verb, which raises the
// prompt), waits for it to end and returns its exit code (admin-request's
// codes: 0 done, 41 refused, 42 stale revision, ...). Choosing No at the
// prompt returns DeclinedExitCode and ErrDeclined. The staged file and its
// directory are deleted before RunElevated returns, whatever happened.
//
// When ctx ends first RunElevated returns ctx's error without waiting; the
// elevated run, which an unelevated process cannot stop, goes on and finds
// its file gone or not, so the change may or may not have been made.
func RunElevated(ctx context.Context, request []byte, o ElevateOptions) (int, error) {
	exe := o.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return -1, fmt.Errorf("adminsock: find vacancyd.exe: %w", err)
		}
	}
	dir, path, err := stageRequest(request)
	if err != nil {
		return -1, err
	}
	defer os.RemoveAll(dir)

	proc, startErr := shellExecuteRunas(exe, elevatedParameters(path), o.Window)
	if startErr != nil {
		return elevationResult(startErr, 0)
	}
	defer windows.CloseHandle(proc)
	for {
		ev, err := windows.WaitForSingleObject(proc, uint32(elevatedPollInterval/time.Millisecond))
		if err != nil {
			return -1, fmt.Errorf("adminsock: wait for the elevated admin-request: %w", err)
		}
		if ev == windows.WAIT_OBJECT_0 {
			break
		}
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
	}
	var code uint32
	if err := windows.GetExitCodeProcess(proc, &code); err != nil {
		return -1, fmt.Errorf("adminsock: the elevated admin-request's exit code: %w", err)
	}
	return elevationResult(nil, code)
}

// stageRequest writes request to a new file that only the signed-in
// account, Administrators and LocalSystem may open. It is created with its
// protected DACL in place (CREATE_NEW), so there is no moment when it is
// readable by anyone else.
func stageRequest(request []byte) (dir, path string, err error) {
	sid, err := processSID()
	if err != nil {
		return "", "", fmt.Errorf("adminsock: read the signed-in account: %w", err)
	}
	sd, err := windows.SecurityDescriptorFromString(stagedFileSDDL(sid))
	if err != nil {
		return "", "", fmt.Errorf("adminsock: the staged file's security descriptor: %w", err)
	}
	dir, err = os.MkdirTemp("", "vacancyd-request-")
	if err != nil {
		return "", "", fmt.Errorf("adminsock: stage the request: %w", err)
	}
	fail := func(err error) (string, string, error) {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("adminsock: stage the request: %w", err)
	}
	path = filepath.Join(dir, "request.json")
	p16, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return fail(err)
	}
	sa := windows.SecurityAttributes{SecurityDescriptor: sd}
	sa.Length = uint32(unsafe.Sizeof(sa))
	h, err := windows.CreateFile(p16, windows.GENERIC_WRITE, 0, &sa, windows.CREATE_NEW, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		return fail(err)
	}
	f := os.NewFile(uintptr(h), path)
	_, werr := f.Write(request)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fail(werr)
	}
	return dir, path, nil
}

// shellExecuteRunas starts exe with params elevated and returns its process
// handle. A declined prompt is ERROR_CANCELLED.
func shellExecuteRunas(exe, params string, window uintptr) (windows.Handle, error) {
	verb, err := windows.UTF16PtrFromString("runas")
	if err != nil {
		return 0, err
	}
	file, err := windows.UTF16PtrFromString(exe)
	if err != nil {
		return 0, err
	}
	args, err := windows.UTF16PtrFromString(params)
	if err != nil {
		return 0, err
	}
	sei := shellExecuteInfo{
		fMask:        seeMaskNoCloseProcess | seeMaskNoAsync | seeMaskFlagNoUI,
		hwnd:         window,
		lpVerb:       verb,
		lpFile:       file,
		lpParameters: args,
		nShow:        windows.SW_HIDE,
	}
	sei.cbSize = uint32(unsafe.Sizeof(sei))

	// The shell may hand the verb to COM components; it wants an
	// apartment-threaded thread for that, which this one stays for the
	// call.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// S_FALSE (already initialized) needs the matching uninitialize too;
	// RPC_E_CHANGED_MODE (another model) does not, and is no obstacle.
	if err := windows.CoInitializeEx(0, windows.COINIT_APARTMENTTHREADED|windows.COINIT_DISABLE_OLE1DDE); err == nil || errors.Is(err, syscall.Errno(sFalse)) {
		defer windows.CoUninitialize()
	}
	r, _, e := procShellExecuteExW.Call(uintptr(unsafe.Pointer(&sei)))
	runtime.KeepAlive(verb)
	runtime.KeepAlive(file)
	runtime.KeepAlive(args)
	if r == 0 {
		var errno syscall.Errno
		if !errors.As(e, &errno) || errno == 0 {
			return 0, errors.New("ShellExecuteEx failed without saying why")
		}
		return 0, errno
	}
	if sei.hProcess == 0 {
		return 0, errors.New("ShellExecuteEx started no process to wait for")
	}
	return sei.hProcess, nil
}
