package integration

import (
	"fmt"
	"strings"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
)

// hotelsConfig is oneHotelConfig with n hotels on the same credential.
func hotelsConfig(lim limiter.Limit, n int, extra string) func(string) string {
	props := make([]string, n)
	for h := range n {
		props[h] = fmt.Sprintf(`"hotel-%d": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-%d"}]`, h, 1000+h)
	}
	return connconfig.Booking(lim, extra, strings.Join(props, ","))
}
