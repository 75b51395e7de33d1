package integration

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// resendCounter counts the DynamoDB requests the SDK sent again (its
// Amz-Sdk-Request header names an attempt after the first). The state
// and lane stores keep the SDK's retries, so on a loaded machine a write
// whose answer was lost (moto's answers sometimes break off mid-body) is
// sent again after it landed, and the resend meets its own write: a
// change then reads as already applied. A test whose count depends on
// the first answer allows for that only when this says it happened.
type resendCounter struct {
	next    dynamodb.HTTPClient
	resends atomic.Int64
	// lose, if set, drops the answer of each request it picks after the
	// emulator has handled it, as a broken connection would.
	lose func(*http.Request) bool
}

// dynamoDBCountingResends is a client on the local stack's DynamoDB whose
// resent requests c counts.
func dynamoDBCountingResends(t *testing.T, c *resendCounter) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(emulator.Config(t), emulator.ForEmulator, func(o *dynamodb.Options) {
		c.next = o.HTTPClient
		o.HTTPClient = c
	})
}

func (c *resendCounter) Do(r *http.Request) (*http.Response, error) {
	if attempt := r.Header.Get("Amz-Sdk-Request"); attempt != "" && !strings.HasPrefix(attempt, "attempt=1;") && attempt != "attempt=1" {
		c.resends.Add(1)
	}
	resp, err := c.next.Do(r)
	if err == nil && c.lose != nil && c.lose(r) {
		_ = resp.Body.Close()
		return nil, errConnectionReset
	}
	return resp, err
}

// errConnectionReset is an answer lost on the way back; the SDK retries it.
var errConnectionReset = connectionReset{}

type connectionReset struct{}

func (connectionReset) Error() string { return "read tcp: connection reset by peer" }
