package runner

import (
	"time"

	"k8s.io/utils/clock"
)

// alarm is a timer for one instant of the runner's clock, re-armed only
// when the instant changes. An instant that has already come fires at once
// (a fake clock's timers fire only when stepped).
type alarm struct {
	clock clock.Clock
	at    time.Time
	timer clock.Timer
	c     <-chan time.Time // nil while disarmed: a select never picks it
}

// set arms the alarm for at, unless it is already armed for at.
func (a *alarm) set(at time.Time) {
	if a.c != nil && a.at.Equal(at) {
		return
	}
	a.stop()
	a.at = at
	d := at.Sub(a.clock.Now())
	if d <= 0 {
		now := make(chan time.Time, 1)
		now <- a.clock.Now()
		a.c = now
		return
	}
	a.timer = a.clock.NewTimer(d)
	a.c = a.timer.C()
}

// stop disarms the alarm. Call it after receiving from C too, so that a
// later set arms it afresh.
func (a *alarm) stop() {
	if a.timer != nil {
		a.timer.Stop()
	}
	a.timer, a.c = nil, nil
}

// C fires once when the armed instant comes; nil while disarmed.
func (a *alarm) C() <-chan time.Time { return a.c }
