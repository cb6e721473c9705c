// Command beater is the command that test/run has `leasehold run` run: it
// appends a line "<unix nanos> <LEASEHOLD_FENCING_TOKEN> <LEASEHOLD_TERM>"
// to the file named by $BEAT_FILE when it starts and every 5 ms, so the
// test can tell exactly when, and under which token, it ran.
//
// With $BEAT_DIR set instead, the file is $BEAT_DIR/$LEASEHOLD_LEASE.beats:
// one file per Lease, for `leasehold run --each`.
//
// On SIGTERM it appends "# SIGTERM <unix nanos>" and exits at once with
// status $BEAT_TERM_EXIT (default 0), or carries on beating when
// $BEAT_IGNORE_TERM is 1 (only SIGKILL stops it then).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

const period = 5 * time.Millisecond

func main() {
	path := os.Getenv("BEAT_FILE")
	if dir := os.Getenv("BEAT_DIR"); dir != "" {
		path = filepath.Join(dir, os.Getenv("LEASEHOLD_LEASE")+".beats")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "beater:", err)
		os.Exit(1)
	}
	token, term := os.Getenv("LEASEHOLD_FENCING_TOKEN"), os.Getenv("LEASEHOLD_TERM")
	ignore := os.Getenv("BEAT_IGNORE_TERM") == "1"
	code, _ := strconv.Atoi(os.Getenv("BEAT_TERM_EXIT"))

	sigterm := make(chan os.Signal, 1)
	signal.Notify(sigterm, syscall.SIGTERM)
	// One write per line (O_APPEND): SIGKILL never leaves part of a line.
	// A reader racing a write may still see part of the last line (see
	// test/run's beatsOf): it counts a line once its newline is there.
	write := func(line string) {
		if _, err := f.WriteString(line); err != nil {
			fmt.Fprintln(os.Stderr, "beater:", err)
			os.Exit(1)
		}
	}
	beat := func() { write(fmt.Sprintf("%d %s %s\n", time.Now().UnixNano(), token, term)) }

	beat()
	ticker := time.NewTicker(period)
	for {
		select {
		case <-sigterm:
			write(fmt.Sprintf("# SIGTERM %d\n", time.Now().UnixNano()))
			if !ignore {
				os.Exit(code)
			}
		case <-ticker.C:
			beat()
		}
	}
}
