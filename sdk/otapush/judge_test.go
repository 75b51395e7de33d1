package otapush

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// xmlJudge reads a toy XML answer the way a vendor format does: <Errors>
// under any status is a refusal, <Warnings> an accepted push with
// warnings, <Busy> a throttle, <Retry> a transient failure.
func xmlJudge(status int, _ http.Header, body []byte) Judgement {
	switch {
	case bytes.Contains(body, []byte("<Errors>")):
		return Judgement{Refused: true, Reason: "392: Room ID is not valid", Detail: "named"}
	case bytes.Contains(body, []byte("<Busy>")):
		return Judgement{Throttled: true, RetryAfter: 4 * time.Second}
	case bytes.Contains(body, []byte("<Retry>")), status >= 500:
		return Judgement{Transient: true, Reason: "retry"}
	case bytes.Contains(body, []byte("<Warnings>")):
		return Judgement{Warnings: []string{"W1: rate below minimum"}}
	}
	return Judgement{}
}

// With a Judge, the body decides: a 200 carrying an error is a refusal
// (never a success), a throttle in the body takes the throttle path, and
// warnings come back on the Response.
func TestPushJudgesTheBodyNotTheStatus(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ok := scripted{status: 200, body: "<Success/>"}
	tests := []struct {
		name         string
		script       []scripted
		wantErr      error
		wantCalls    int
		wantWarnings int
		penalties    int
		detail       any
	}{
		{"200 with Errors is refused", []scripted{{status: 200, body: "<Errors>392</Errors>"}}, ErrPermanent, 1, 0, 0, "named"},
		{"200 with Warnings is accepted, warned", []scripted{{status: 200, body: "<Warnings>W1</Warnings>"}}, nil, 1, 1, 0, nil},
		{"200 Busy is a throttle, retried", []scripted{{status: 200, body: "<Busy>1</Busy>"}, ok}, nil, 2, 0, 1, nil},
		{"200 Retry is transient, retried", []scripted{{status: 200, body: "<Retry>1</Retry>"}, ok}, nil, 2, 0, 0, nil},
		{"401 refused keeps its status", []scripted{{status: 401, body: "<Errors>auth</Errors>"}}, ErrPermanent, 1, 0, 0, "named"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := vendor(t, tt.script...)
			bl := &bucketLog{}
			c, err := New(srv.Client(), bl, DefaultPolicy, WithClock(func() time.Time { return now }),
				WithJitter(func(time.Duration) time.Duration { return time.Millisecond }), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			c.sleep = func(context.Context, time.Duration) error { return nil }
			resp, err := c.Push(context.Background(), Request{
				Bucket: limiter.Bucket{Key: "booking_com#c1#availability", Limit: limiter.PerSecond(5, 5)},
				URL:    srv.URL, JobID: "job-1", Body: []byte("<RQ/>"), Judge: xmlJudge,
				Header: http.Header{"Authorization": {"Bearer secret"}, "Content-Type": {"application/xml"}}, Reserved: true,
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Push = %v, want %v", err, tt.wantErr)
			}
			if *calls != tt.wantCalls || len(resp.Warnings) != tt.wantWarnings || len(bl.penalties) != tt.penalties {
				t.Errorf("%d requests, warnings %v, %d penalties; want %d, %d, %d", *calls, resp.Warnings, len(bl.penalties), tt.wantCalls, tt.wantWarnings, tt.penalties)
			}
			var perm *PermanentError
			if errors.As(err, &perm) && (perm.Detail != tt.detail || perm.Status != tt.script[0].status) {
				t.Errorf("refusal %+v, want status %d and the judge's detail", perm, tt.script[0].status)
			}
		})
	}
}
