package gcra

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// The windows, written as UTC instants worked out by hand from the zones'
// rules (Amsterdam: CET +1, CEST +2 from 2026-03-29 01:00 UTC to
// 2026-10-25 01:00 UTC; Kolkata +5:30).
func TestQuotaWindowInTheVendorsZone(t *testing.T) {
	ams := mustZone(t, "Europe/Amsterdam")
	kol := mustZone(t, "Asia/Kolkata")
	tests := []struct {
		name       string
		q          Quota
		at         string
		start, end string
	}{
		{"a winter day", Quota{1, Day, ams}, "2026-01-15T12:00:00Z", "2026-01-14T23:00:00Z", "2026-01-15T23:00:00Z"},
		{"23:30 local is still that day", Quota{1, Day, ams}, "2026-01-15T22:30:00Z", "2026-01-14T23:00:00Z", "2026-01-15T23:00:00Z"},
		{"00:00 local starts the next", Quota{1, Day, ams}, "2026-01-15T23:00:00Z", "2026-01-15T23:00:00Z", "2026-01-16T23:00:00Z"},
		{"spring forward: a 23-hour day", Quota{1, Day, ams}, "2026-03-29T12:00:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"},
		{"the day before it", Quota{1, Day, ams}, "2026-03-28T22:59:59Z", "2026-03-27T23:00:00Z", "2026-03-28T23:00:00Z"},
		{"fall back: a 25-hour day", Quota{1, Day, ams}, "2026-10-25T12:00:00Z", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"},
		{"UTC by default", Quota{1, Day, nil}, "2026-10-25T12:00:00Z", "2026-10-25T00:00:00Z", "2026-10-26T00:00:00Z"},
		{"an hour", Quota{1, Hour, ams}, "2026-01-15T12:34:56Z", "2026-01-15T12:00:00Z", "2026-01-15T13:00:00Z"},
		{"the first 02:xx of the fall-back night", Quota{1, Hour, ams}, "2026-10-25T00:30:00Z", "2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z"},
		{"the second 02:xx is another window", Quota{1, Hour, ams}, "2026-10-25T01:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"},
		{"spring forward: 01:xx then 03:xx", Quota{1, Hour, ams}, "2026-03-29T01:10:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"},
		{"a half-hour zone's hours", Quota{1, Hour, kol}, "2026-01-15T12:10:00Z", "2026-01-15T11:30:00Z", "2026-01-15T12:30:00Z"},
		{"a half-hour zone's day", Quota{1, Day, kol}, "2026-01-15T20:00:00Z", "2026-01-15T18:30:00Z", "2026-01-16T18:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end := tt.q.Window(utc(tt.at))
			if !start.Equal(utc(tt.start)) || !end.Equal(utc(tt.end)) {
				t.Errorf("Window(%s) = [%s, %s), want [%s, %s)", tt.at, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), tt.start, tt.end)
			}
		})
	}
}

// A quota of 5 a day in Amsterdam, asked every 7 minutes for three days
// around each DST change: every local calendar day (the oracle: the date
// the clock shows there, not Window) grants exactly 5, the first at the
// first ask after local midnight, and a denial's retry is never before
// the next local midnight nor later than a minute after it.
func TestQuotaAtMostCountPerLocalDayAcrossDST(t *testing.T) {
	ams := mustZone(t, "Europe/Amsterdam")
	q := Quota{Count: 5, Period: Day, Location: ams}
	for _, from := range []string{"2026-03-27T12:00:00Z", "2026-10-23T12:00:00Z"} {
		t.Run(from, func(t *testing.T) {
			var st QuotaState
			granted := map[string]int{}
			firstAsk := map[string]time.Time{}
			firstGrant := map[string]time.Time{}
			end := utc(from).Add(72 * time.Hour)
			for now := utc(from); now.Before(end); now = now.Add(7 * time.Minute) {
				day := now.In(ams).Format("2006-01-02")
				if _, ok := firstAsk[day]; !ok {
					firstAsk[day] = now
				}
				job := fmt.Sprintf("job-%d", now.Unix())
				d, err := q.Decide(st, now, 1, Spread(job))
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					next := now.In(ams).AddDate(0, 0, 1)
					midnight := time.Date(next.Year(), next.Month(), next.Day(), 0, 0, 0, 0, ams)
					if d.RetryAt.Before(midnight) || !d.RetryAt.Before(midnight.Add(time.Minute)) {
						t.Errorf("%s: denied, retry at %s, want within a minute after the local midnight %s", now, d.RetryAt, midnight)
					}
					continue
				}
				st = d.Next
				granted[day]++
				if _, ok := firstGrant[day]; !ok {
					firstGrant[day] = now
				}
			}
			for day, n := range granted {
				if n != 5 {
					t.Errorf("%s: %d granted, want exactly 5", day, n)
				}
				if !firstGrant[day].Equal(firstAsk[day]) {
					t.Errorf("%s: first grant at %s, want the day's first ask %s", day, firstGrant[day], firstAsk[day])
				}
			}
			if len(granted) < 3 {
				t.Errorf("only %d local days granted: %v", len(granted), granted)
			}
		})
	}
}

// Hourly quota across the fall-back night: the repeated 02:xx hour is two
// windows of 3 each, so the local clock's "02" gets 6.
func TestHourlyQuotaInTheRepeatedHour(t *testing.T) {
	ams := mustZone(t, "Europe/Amsterdam")
	q := Quota{Count: 3, Period: Hour, Location: ams}
	var st QuotaState
	perUTCHour := map[int]int{}
	for now := utc("2026-10-24T23:00:00Z"); now.Before(utc("2026-10-25T03:00:00Z")); now = now.Add(5 * time.Minute) {
		d, err := q.Decide(st, now, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			st = d.Next
			perUTCHour[now.Hour()]++
		}
	}
	for h := 23; h != 3; h = (h + 1) % 24 {
		if perUTCHour[h] != 3 {
			t.Errorf("UTC hour %02d: %d granted, want 3 (%v)", h, perUTCHour[h], perUTCHour)
		}
	}
}

// 1000 denied jobs come back over the first minute after the reset, none
// before it, about evenly: each tenth of the minute gets 100 ± 35; the same
// job always gets the same offset.
func TestSpentQuotaSpreadsTheFirstMinuteAfterTheReset(t *testing.T) {
	ams := mustZone(t, "Europe/Amsterdam")
	q := Quota{Count: 50, Period: Day, Location: ams}
	now := utc("2026-03-28T22:59:00Z") // 23:59 local, the night before spring forward
	st := QuotaState{Window: utc("2026-03-27T23:00:00Z").Unix(), Used: 50}
	reset := utc("2026-03-28T23:00:00Z")
	perTenth := make([]int, 10)
	for i := range 1000 {
		job := fmt.Sprintf("hotel-%d#2026-04", i)
		d, err := q.Decide(st, now, 1, Spread(job))
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || d.Remaining != 0 || !d.Reset.Equal(reset) {
			t.Fatalf("%s: %+v, want a denial until %s", job, d, reset)
		}
		off := d.RetryAt.Sub(reset)
		if off < 0 || off >= time.Minute {
			t.Fatalf("%s: retry %v after the reset, want within [0, 1m)", job, off)
		}
		perTenth[off/(6*time.Second)]++
		if again, _ := q.Decide(st, now, 1, Spread(job)); !again.RetryAt.Equal(d.RetryAt) {
			t.Errorf("%s: a second ask gets %s, the first %s", job, again.RetryAt, d.RetryAt)
		}
	}
	for i, n := range perTenth {
		if n < 65 || n > 135 {
			t.Errorf("seconds %d–%d after the reset: %d retries, want about 100 (%v)", 6*i, 6*i+6, n, perTenth)
		}
	}
}

func TestQuotaRefusesWhatItCannotGrant(t *testing.T) {
	ams := mustZone(t, "Europe/Amsterdam")
	now := utc("2026-01-15T12:00:00Z")
	if _, err := (Quota{Count: 5, Period: Day, Location: ams}).Decide(QuotaState{}, now, 6, 0); !errors.Is(err, ErrNeverGrantable) {
		t.Errorf("n over count: %v, want ErrNeverGrantable", err)
	}
	for _, tt := range []struct {
		count        int
		period, zone string
		field        string
	}{
		{0, "day", "Europe/Amsterdam", "quota.count"},
		{5, "week", "Europe/Amsterdam", "quota.period"},
		{5, "day", "Europe/Atlantis", "quota.time_zone"},
	} {
		_, err := LoadQuota(tt.count, tt.period, tt.zone)
		var ae *ArgumentError
		if !errors.As(err, &ae) || ae.Field != tt.field {
			t.Errorf("LoadQuota(%d, %q, %q) = %v, want an error on %s", tt.count, tt.period, tt.zone, err, tt.field)
		}
	}
	if q, err := LoadQuota(50, "day", "Europe/Amsterdam"); err != nil || q.Location.String() != "Europe/Amsterdam" {
		t.Errorf("LoadQuota = %+v, %v", q, err)
	}
}
