package main

import (
	"os"

	xterm "golang.org/x/term"
)

// isTerminal reports whether f is a terminal that understands cursor
// movement (TERM is not "dumb").
func isTerminal(f *os.File) bool {
	return os.Getenv("TERM") != "dumb" && xterm.IsTerminal(int(f.Fd()))
}

// terminalWidth is f's width in columns, or fallback when unknown.
func terminalWidth(f *os.File, fallback int) int {
	if w, _, err := xterm.GetSize(int(f.Fd())); err == nil && w > 0 {
		return w
	}
	return fallback
}
