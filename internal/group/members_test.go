package group

import (
	"testing"
	"time"
)

// A member remembers when it sent its latest member Lease writes, so that
// it can date a handover citing one of them; older writes are forgotten.
func TestMemberRemembersWhenItSentItsLatestWrites(t *testing.T) {
	m := &membership{}
	base := time.Unix(1000, 0)
	versions := []string{"11", "12", "13", "14", "15"}
	for i, v := range versions {
		m.wrote(v, base.Add(time.Duration(i)*time.Second))
	}
	for i, v := range versions {
		at, ok := m.sentAt(v)
		if want := i >= len(versions)-keptWrites; ok != want {
			t.Errorf("sentAt(%s) known = %v, want %v", v, ok, want)
		} else if ok && !at.Equal(base.Add(time.Duration(i)*time.Second)) {
			t.Errorf("sentAt(%s) = %v, want %v", v, at, base.Add(time.Duration(i)*time.Second))
		}
	}
	if _, ok := m.sentAt("99"); ok {
		t.Error("sentAt of a version this member never wrote is known")
	}
}

// A renewal of a member Lease updates the published versions (a leaver's
// witness) without waking the planner: nothing it plans on changed.
func TestARenewalAloneIsPublishedWithoutANotice(t *testing.T) {
	notify := make(chan struct{}, 1)
	now := time.Unix(1000, 0)
	m := &membership{notify: notify, listed: true, records: map[string]memberRecord{
		"a": {identity: "a", resourceVersion: "5", seenAt: now, ttl: time.Minute},
	}}
	m.publish(now)
	<-notify // the first view is news

	m.records["a"] = memberRecord{identity: "a", resourceVersion: "6", seenAt: now, ttl: time.Minute}
	m.publish(now)
	select {
	case <-notify:
		t.Error("a renewal alone notified the planner")
	default:
	}
	if got := m.load().Versions["a"]; got != "6" {
		t.Errorf("published version of a = %q, want 6", got)
	}

	m.records["b"] = memberRecord{identity: "b", resourceVersion: "7", seenAt: now, ttl: time.Minute}
	m.publish(now)
	select {
	case <-notify:
	default:
		t.Error("a member joining did not notify the planner")
	}
}
