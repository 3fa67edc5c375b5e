//go:build windows

package desktop

const defaultOrder = "windows"
