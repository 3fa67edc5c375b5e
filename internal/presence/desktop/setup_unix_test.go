//go:build !windows && !darwin

package desktop

const defaultOrder = "mutter,screensaver,x11,logind"
