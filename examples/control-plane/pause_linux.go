package main

import (
	"runtime"
	"syscall"
)

// pause stops this process (SIGSTOP) until it is sent SIGCONT. The signal
// is sent to the calling thread itself, which stops as the system call
// returns, before this goroutine runs on (a signal to the process could be
// taken by another thread while this one sends the write); the rest of the
// process stops with it.
func pause() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
