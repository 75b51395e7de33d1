package config

import (
	"strings"
	"testing"
	"time"
)

func TestLingerParsedAndBounded(t *testing.T) {
	for _, tc := range []struct {
		linger string
		want   time.Duration
		err    string
	}{
		{"", -1, ""},
		{"0s", 0, ""},
		{"750ms", 750 * time.Millisecond, ""},
		{"10s", 10 * time.Second, ""},
		{"11s", 0, `linger: "11s"`},
		{"-1s", 0, `linger: "-1s"`},
		{"soon", 0, `linger: "soon"`},
	} {
		c := Config{Linger: tc.linger}
		got, err := c.LingerFor()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("linger %q: err %v, want one naming %s", tc.linger, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("linger %q = %v, %v; want %v", tc.linger, got, err, tc.want)
		}
	}
}
