//go:build darwin

package desktop

const defaultOrder = "macos"
