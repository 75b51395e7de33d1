// Package connconfig writes the connections JSON (sdk/pipeline/config) of
// tests that serve one channel, booking_com, on the vendor a test starts:
// each function takes the vendor's URL, known only once it listens. It is
// for tests only; the SDK never imports it.
package connconfig

import (
	"fmt"
	"strings"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Credentials is one channel (booking_com, its rates endpoint under lim)
// whose n credentials each connect hotel-aurora (hotel refs BK-1..BK-n):
// n lanes per kind, on n buckets, in one lane item.
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

// Booking is one channel (availability and rates under lim, each endpoint
// with extra settings) on one credential, cred-1, with the properties
// given as JSON members.
func Booking(lim limiter.Limit, extra, properties string) func(url string) string {
	return func(url string) string {
		return fmt.Sprintf(`{
  "channels": {"booking_com": {
    "base_url": %q, "allow_http": true,
    "endpoints": {
      "availability": {"path": "/v1/availability", "limit": {"rate": %g, "burst": %d}%s},
      "rates": {"path": "/v1/rates", "limit": {"rate": %g, "burst": %d}%s}
    },
    "credentials": {"cred-1": {"token_env": "T"}}
  }},
  "properties": {%s}
}`, url, lim.Rate, lim.Burst, extra, lim.Rate, lim.Burst, extra, properties)
	}
}
