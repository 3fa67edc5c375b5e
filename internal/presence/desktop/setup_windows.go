//go:build windows

package desktop

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	user32                     = windows.NewLazySystemDLL("user32.dll")
	kernel32                   = windows.NewLazySystemDLL("kernel32.dll")
	powrprof                   = windows.NewLazySystemDLL("powrprof.dll")
	procGetLastInputInfo       = user32.NewProc("GetLastInputInfo")
	procGetTickCount           = kernel32.NewProc("GetTickCount")
	procCallNtPowerInformation = powrprof.NewProc("CallNtPowerInformation")
)

// lastInputInfo is LASTINPUTINFO.
type lastInputInfo struct {
	cbSize uint32
	dwTime uint32
}

// systemExecutionState is POWER_INFORMATION_LEVEL's SystemExecutionState.
const systemExecutionState = 16

// Default returns Windows' idle source, GetLastInputInfo (the input of
// the session the reporter runs in), and its inhibitor checker: a program
// holding ES_DISPLAY_REQUIRED.
func Default(LookupEnv) Setup {
	return Setup{
		Candidates: []Candidate{{Name: "windows", Open: func(context.Context) (IdleSource, error) {
			return &funcSource{name: "windows", read: lastInput}, nil
		}}},
		Inhibitors: []InhibitChecker{&funcChecker{name: "execution-state", check: executionState}},
	}
}

func lastInput(context.Context) (time.Duration, error) {
	info := lastInputInfo{cbSize: uint32(unsafe.Sizeof(lastInputInfo{}))}
	if r, _, err := procGetLastInputInfo.Call(uintptr(unsafe.Pointer(&info))); r == 0 {
		return 0, fmt.Errorf("GetLastInputInfo: %w", err)
	}
	now, _, _ := procGetTickCount.Call()
	return idleFromTicks(uint32(now), info.dwTime), nil
}

func executionState(context.Context) (bool, error) {
	var state uint32
	r, _, _ := procCallNtPowerInformation.Call(systemExecutionState, 0, 0, uintptr(unsafe.Pointer(&state)), unsafe.Sizeof(state))
	if r != 0 {
		return false, fmt.Errorf("CallNtPowerInformation(SystemExecutionState): status %#x", r)
	}
	return displayRequired(state), nil
}
