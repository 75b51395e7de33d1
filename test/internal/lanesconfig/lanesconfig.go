// Package lanesconfig writes the connections of tests whose lanes share
// one lane item: one channel whose credentials each connect the same
// property. It is for tests only; the SDK never imports it.
package lanesconfig

import (
	"fmt"
	"strings"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Credentials is one channel (booking_com, its rates endpoint under lim)
// whose n credentials each connect hotel-aurora (hotel refs BK-1..BK-n):
// n lanes per kind, on n buckets, in one lane item. It takes the vendor's
// URL, known only once the vendor listens.
func Credentials(lim limiter.Limit, n int) func(url string) string {
	return func(url string) string {
		var creds, targets []string
		for i := 1; i <= n; i++ {
			creds = append(creds, fmt.Sprintf(`"cred-%d": {"token_env": "T"}`, i))
			targets = append(targets, fmt.Sprintf(`{"channel": "booking_com", "credential": "cred-%d", "hotel_ref": "BK-%d"}`, i, i))
		}
		return fmt.Sprintf(`{
  "channels": {"booking_com": {
    "base_url": %q, "allow_http": true,
    "endpoints": {"rates": {"path": "/v1/rates", "limit": {"rate": %g, "burst": %d}}},
    "credentials": {%s}
  }},
  "properties": {"hotel-aurora": [%s]}
}`, url, lim.Rate, lim.Burst, strings.Join(creds, ", "), strings.Join(targets, ", "))
	}
}
