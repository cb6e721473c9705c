//go:build !linux

package main

import "log"

// pause is Linux's alone (PAUSE_BEFORE_WRITE is for the tests, which run
// there): elsewhere it says so and does not pause.
func pause() { log.Print("PAUSE_BEFORE_WRITE: pausing needs Linux; not pausing") }
