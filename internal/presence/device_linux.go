package presence

import (
	"os"
	"syscall"
	"unsafe"
)

// openDevice opens an input device for reading without blocking: a named
// pipe standing in for a device opens at once, and reads wait in the
// runtime's poller, so closing the file ends them.
func openDevice(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// inputPropAccelerometer is INPUT_PROP_ACCELEROMETER: the device reports the
// machine's motion, not the owner's input.
const inputPropAccelerometer = 0x06

// eviocgprop4 is EVIOCGPROP(4): read 4 bytes of the device's property bits
// (asm-generic ioctl encoding; elsewhere the call fails and nothing is
// skipped).
const eviocgprop4 = 2<<30 | 4<<16 | 'E'<<8 | 0x09

// skipDevice says why a device is not watched, or "" to watch it. An
// accelerometer (a laptop's motion sensor) sends EV_ABS all the time and
// would make the owner look present forever. Files that are not evdev
// devices (named pipes in tests) answer no properties and are watched.
func skipDevice(f *os.File) string {
	rc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var props [4]byte
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, eviocgprop4, uintptr(unsafe.Pointer(&props[0])))
	}); err != nil || errno != 0 {
		return ""
	}
	if props[inputPropAccelerometer/8]&(1<<(inputPropAccelerometer%8)) != 0 {
		return "an accelerometer, not owner input"
	}
	return ""
}
