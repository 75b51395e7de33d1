package syncer

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// A malformed RetryOwnersAttribute is ignored whole: the change then
// recovers its lanes by their lease, as a plain redelivery does.
func TestOwnersOfIgnoresAMalformedAttribute(t *testing.T) {
	nonce, tok := "n-0123456789abcdef", "t-0123456789abcdef01234567"
	for _, tt := range []struct {
		name, v string
		want    []string
	}{
		{"absent", "", nil},
		{"a nonce", nonce, []string{nonce}},
		{"a nonce and a claim's token", nonce + "," + tok, []string{nonce, tok}},
		{"a mark token (its nonce says it)", "m-0123456789abcdef01234567", nil},
		{"upper case", strings.ToUpper(nonce), nil},
		{"a short nonce", nonce[:17], nil},
		{"an empty entry", nonce + ",", nil},
		{"spaces", nonce + ", " + tok, nil},
		{"a quote", `n-0123456789abcde"`, nil},
		{"over the bound", strings.Repeat(nonce+",", maxRetryOwners) + nonce, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := OwnersOf(tt.v); !slices.Equal(got, tt.want) {
				t.Errorf("OwnersOf(%.40q) = %v, want %v", tt.v, got, tt.want)
			}
		})
	}
}

// A copy takes as its own exactly the lanes its failed deliveries held:
// marked under their nonce (whatever the kin: the mark may have covered
// other changes of the batch), or moved by their claims.
func TestOffersHoldOnlyTheFailedDeliverysLanes(t *testing.T) {
	a := lane.ID{Property: "p", Kind: "rates", Channel: "booking_com", Credential: "c", HotelRef: "BK-1"}
	b := a
	b.HotelRef = "BK-2"
	ours, other := "n-0123456789abcdef", "n-fedcba9876543210"
	claimed := "t-0123456789abcdef01234567"
	var o offers
	o.add([]string{ours, claimed})
	for _, tt := range []struct {
		name  string
		owner string
		id    lane.ID
		want  bool
	}{
		{"marked under our nonce", "m-00000000" + markTail(ours, a), a, true},
		{"marked under our nonce, another kin", "m-11111111" + markTail(ours, a), a, true},
		{"our nonce's token of another lane", "m-00000000" + markTail(ours, b), a, false},
		{"marked under another nonce", "m-00000000" + markTail(other, a), a, false},
		{"moved by our claim", claimed, a, true},
		{"another claim's", "t-fedcba9876543210fedcba98", a, false},
		{"no owner", "", a, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := o.holds(tt.owner, tt.id); got != tt.want {
				t.Errorf("holds(%q, %s) = %v, want %v", tt.owner, tt.id, got, tt.want)
			}
		})
	}
	if (offers{}).holds("m-00000000"+markTail(ours, a), a) {
		t.Error("a change that carries nothing (a plain redelivery) took a lane as its own")
	}
}

// What a failed change's copy carries: its invocation's nonce if it
// marked, the tokens its claims moved its lanes to, and what it carried
// itself (its own claims followed), once each.
func TestHeldAfterCarriesTheNonceMovedTokensAndWhatCameBefore(t *testing.T) {
	inv := newInvocation(newNonce())
	carriedNonce, carriedTok := "n-fedcba9876543210", "t-000000000000000000000001"
	mark1, mark2 := "m-00000000"+markTail(inv.nonce, lane.ID{HotelRef: "1"}), "m-00000000"+markTail(inv.nonce, lane.ID{HotelRef: "2"})
	inv.claimed(mark1, "t-000000000000000000000002")
	inv.claimed("t-000000000000000000000002", "t-000000000000000000000003")
	inv.claimed(carriedTok, "t-000000000000000000000004")
	got := heldAfter(inv, true, []string{mark1, mark2}, []string{carriedNonce, carriedTok, carriedNonce})
	want := []string{inv.nonce, "t-000000000000000000000003", carriedNonce, "t-000000000000000000000004"}
	if !slices.Equal(got, want) {
		t.Errorf("heldAfter = %v, want %v", got, want)
	}
	if got := heldAfter(inv, false, nil, []string{carriedNonce}); !slices.Equal(got, []string{carriedNonce}) {
		t.Errorf("a change that failed before its mark carries %v, want what it carried (%v)", got, []string{carriedNonce})
	}
}

type sentBatches struct {
	entries []sqstypes.SendMessageBatchRequestEntry
}

func (s *sentBatches) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.entries = append(s.entries, in.Entries...)
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// Retry puts what the failed delivery held in RetryOwnersAttribute, which
// OwnersOf reads back whole; a failure that held nothing sends none.
func TestRetryCarriesTheOwners(t *testing.T) {
	held := []string{"n-0123456789abcdef", "t-0123456789abcdef01234567"}
	msgs := []Message{{ID: "a", Body: "{}"}, {ID: "b", Body: "{}"}}
	out := []MessageResult{{ID: "a", Err: context.DeadlineExceeded, Owners: held}, {ID: "b", Err: context.DeadlineExceeded}}
	var q sentBatches
	if sent := Retry(context.Background(), &q, "url", msgs, out); len(sent) != 2 {
		t.Fatalf("sent %v, want both", sent)
	}
	got := OwnersOf(aws.ToString(q.entries[0].MessageAttributes[RetryOwnersAttribute].StringValue))
	if !slices.Equal(got, held) {
		t.Errorf("the copy carries %v, want %v", got, held)
	}
	if _, ok := q.entries[1].MessageAttributes[RetryOwnersAttribute]; ok {
		t.Error("a change that held no lane carries an owners attribute")
	}
}
