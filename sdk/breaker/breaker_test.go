package breaker

import (
	"errors"
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b, err := New(3, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at     time.Duration
		record *bool // nil: only check Allow
		open   bool
	}{
		{0, fail, false},
		{1 * time.Second, fail, false},
		{2 * time.Second, ok, false}, // a success resets the count
		{3 * time.Second, fail, false},
		{4 * time.Second, fail, false},
		{5 * time.Second, fail, true}, // third in a row: open for 10s
		{14 * time.Second, nil, true},
		{15 * time.Second, nil, false}, // cooldown over: half-open
		{15 * time.Second, fail, true}, // one failure reopens
		{25 * time.Second, ok, false},  // one success closes
		{26 * time.Second, fail, false},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		if s.record != nil {
			b.Record(now, *s.record)
		}
		err := b.Allow(now)
		if open := errors.Is(err, ErrOpen); open != s.open {
			t.Fatalf("step %d at +%v: open = %v, want %v", i, s.at, open, s.open)
		}
	}
}

var (
	yes, no = true, false
	ok      = &yes
	fail    = &no
)

func TestNewRefusesBadSettings(t *testing.T) {
	if _, err := New(0, time.Second); err == nil {
		t.Error("threshold 0 accepted")
	}
	if _, err := New(1, 0); err == nil {
		t.Error("cooldown 0 accepted")
	}
}
