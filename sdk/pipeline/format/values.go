package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Values are one date's ARI values in the vocabulary the built-in XML
// formats understand, by kind (the JSON keys of a change event's values):
//
//	availability  available (int ≥ 0: rooms to sell)
//	              closed (bool: stop-sell; of the room type, or of the rate
//	              plan when the cell names one)
//	rates         amount (decimal string or number ≥ 0, at most 4 decimals)
//	              currency (ISO 4217, "EUR")
//	              guests (int 1..99: the occupancy the amount is for)
//	restrictions  min_los, max_los (int 1..999 nights)
//	              closed_to_arrival, closed_to_departure, closed (bool)
//
// A key outside its kind's list, a value of the wrong type or range, or
// values a format has no element for are an *UnexpressibleError: the
// pipeline dead-letters the change with the reason rather than send the
// vendor something else. The json format passes values through unread.
type Values struct {
	Available         *int   `json:"available,omitempty"`
	Closed            *bool  `json:"closed,omitempty"`
	Amount            string `json:"amount,omitempty"`
	Currency          string `json:"currency,omitempty"`
	Guests            int    `json:"guests,omitempty"`
	MinLOS            *int   `json:"min_los,omitempty"`
	MaxLOS            *int   `json:"max_los,omitempty"`
	ClosedToArrival   *bool  `json:"closed_to_arrival,omitempty"`
	ClosedToDeparture *bool  `json:"closed_to_departure,omitempty"`
}

// Vocabulary lists the keys each kind's values may use.
var Vocabulary = map[string][]string{
	"availability": {"available", "closed"},
	"rates":        {"amount", "currency", "guests"},
	"restrictions": {"min_los", "max_los", "closed_to_arrival", "closed_to_departure", "closed"},
}

// ErrUnexpressible is matched by every *UnexpressibleError.
var ErrUnexpressible = errors.New("value not expressible in the channel's format")

// UnexpressibleError names a value a format cannot carry. The change that
// holds it can never be pushed as it is: the pipeline dead-letters it with
// Error() as the reason.
type UnexpressibleError struct {
	Format   string
	Kind     string
	RoomType string
	RatePlan string
	Date     string
	Reason   string
}

func (e *UnexpressibleError) Error() string {
	return fmt.Sprintf("format %s cannot express %s of room type %q rate plan %q on %s: %s; fix the PMS values or the channel's format",
		e.Format, e.Kind, e.RoomType, e.RatePlan, e.Date, e.Reason)
}

// Is makes errors.Is(err, ErrUnexpressible) true.
func (e *UnexpressibleError) Is(target error) bool { return target == ErrUnexpressible }

var (
	amountPattern   = regexp.MustCompile(`^[0-9]{1,9}(\.[0-9]{1,4})?$`)
	currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
)

// ParseValues reads a date's values for kind against the vocabulary.
func ParseValues(kind string, raw json.RawMessage) (Values, error) {
	allowed, ok := Vocabulary[kind]
	if !ok {
		return Values{}, fmt.Errorf("unknown kind %q", kind)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Values{}, fmt.Errorf("values are not a JSON object: %v", err)
	}
	if len(m) == 0 {
		return Values{}, errors.New("values are empty")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var v Values
	for _, k := range keys {
		if !contains(allowed, k) {
			return Values{}, fmt.Errorf("%q is not a %s value (want %s)", k, kind, strings.Join(allowed, ", "))
		}
		if err := v.set(k, m[k]); err != nil {
			return Values{}, fmt.Errorf("%s: %v", k, err)
		}
	}
	if kind == "rates" && v.Amount == "" {
		return Values{}, errors.New("rates need an amount")
	}
	if v.MinLOS != nil && v.MaxLOS != nil && *v.MinLOS > *v.MaxLOS {
		return Values{}, fmt.Errorf("min_los %d is over max_los %d", *v.MinLOS, *v.MaxLOS)
	}
	return v, nil
}

func (v *Values) set(k string, raw json.RawMessage) error {
	switch k {
	case "available":
		n, err := intIn(raw, 0, 1<<30)
		v.Available = &n
		return err
	case "min_los", "max_los":
		n, err := intIn(raw, 1, 999)
		if k == "min_los" {
			v.MinLOS = &n
		} else {
			v.MaxLOS = &n
		}
		return err
	case "guests":
		n, err := intIn(raw, 1, 99)
		v.Guests = n
		return err
	case "closed", "closed_to_arrival", "closed_to_departure":
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return fmt.Errorf("want true or false, got %s", raw)
		}
		switch k {
		case "closed":
			v.Closed = &b
		case "closed_to_arrival":
			v.ClosedToArrival = &b
		default:
			v.ClosedToDeparture = &b
		}
	case "amount":
		s := strings.Trim(string(bytes.TrimSpace(raw)), `"`)
		if !amountPattern.MatchString(s) {
			return fmt.Errorf("want a decimal ≥ 0 with at most 4 decimals, got %s", raw)
		}
		v.Amount = s
	case "currency":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || !currencyPattern.MatchString(s) {
			return fmt.Errorf("want an ISO 4217 code such as \"EUR\", got %s", raw)
		}
		v.Currency = s
	}
	return nil
}

func intIn(raw json.RawMessage, lo, hi int) (int, error) {
	n, err := strconv.Atoi(string(bytes.TrimSpace(raw)))
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want an integer %d..%d, got %s", lo, hi, raw)
	}
	return n, nil
}

// key is v's canonical form, for merging consecutive dates with equal
// values into one range.
func (v Values) key() string {
	b, _ := json.Marshal(v)
	return string(b)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
