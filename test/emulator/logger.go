package emulator

import (
	"context"
	"strings"

	"github.com/aws/smithy-go/logging"
)

// QuietCancelled wraps an AWS SDK logger for the local clients: it drops
// the SDK's "failed to discard remaining HTTP response body" and "failed to
// close HTTP response body" warnings of a call whose context had already
// ended, and passes everything else on.
//
// Where they came from: a demo or test that ends cancels the calls it still
// has in flight (pollers' ReceiveMessage, workers' DynamoDB reads). When the
// cancellation lands after the response headers, Go's transport closes the
// connection under the body being read; the SDK's deserializer fails, then
// drains the body to let the connection be reused, reads the closed socket
// and warns: "read tcp …: use of closed network connection" (or a checksum
// mismatch on the truncated DynamoDB body). The connection is closed and
// never reused either way, so for a cancelled call the warning says
// nothing; on a call that was not cancelled it still shows.
func QuietCancelled(next logging.Logger) logging.Logger {
	if next == nil {
		next = logging.Nop{}
	}
	return quietCancelled{next: next, ctx: context.Background()}
}

type quietCancelled struct {
	next logging.Logger
	ctx  context.Context // the operation's, once the SDK hands it over
}

// WithContext is called by the SDK with each operation's context
// (logging.ContextLogger).
func (l quietCancelled) WithContext(ctx context.Context) logging.Logger {
	return quietCancelled{next: logging.WithContext(ctx, l.next), ctx: ctx}
}

func (l quietCancelled) Logf(c logging.Classification, format string, v ...any) {
	if c == logging.Warn && (l.ctx.Err() != nil || closedUnderUs(v)) &&
		(strings.HasPrefix(format, "failed to discard remaining HTTP response body") || strings.HasPrefix(format, "failed to close HTTP response body")) {
		return
	}
	l.next.Logf(c, format, v...)
}

// closedUnderUs reports a read of a connection this process closed, or
// the checksum of the body it cut short. The SDK sometimes logs these
// without the operation's context (so ctx above is still the background
// one); against the local emulators only a cancelled call closes a
// connection under its body, so the error says it.
func closedUnderUs(v []any) bool {
	for _, a := range v {
		if err, ok := a.(error); ok && (strings.Contains(err.Error(), "use of closed network connection") ||
			strings.Contains(err.Error(), "response did not match expected checksum")) {
			return true
		}
	}
	return false
}
