package syncer

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// A change that failed after its mark left its lanes owned by tokens of
// its delivery's own, for a lease. What lets its copy (Retry) know them:
//
//   - the delivery's nonce (n-…). Every mark token of one invocation ends
//     in a hash of its nonce and the lane (markTail), so the copy knows a
//     lane its failed delivery marked from the nonce alone, even one whose
//     mark landed with its answer lost.
//   - the tokens claims of that invocation made owners (t-…), which no
//     nonce derives.
//
// The copy's own marks use a nonce of their own: only the lanes its
// failed delivery held are taken as the copy's, and they are claimed.

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "t-" + hex.EncodeToString(b)
}

// newNonce is an invocation's mark nonce: 16 random hex digits.
func newNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "n-" + hex.EncodeToString(b)
}

// markTail is the part of the mark token nonce's invocation gives lane id
// that follows the kin (16 of its 26 characters).
func markTail(nonce string, id lane.ID) string { return tailOf(nonce, id.String()) }

func tailOf(nonce, lane string) string {
	h := sha256.Sum256([]byte(nonce + "\x00" + lane))
	return hex.EncodeToString(h[:8])
}

// markTokens are the owner tokens a mark of lanes ids offers, for the
// changes seed names, in the invocation of nonce: each lane's kin (the
// first 10 characters, which every delivery of those changes shares) and
// its tail (markTail). They are made before the mark's write, which only
// looks them up.
func markTokens(seed, nonce string, ids []lane.ID) (kin, token map[lane.ID]string) {
	kin, token = make(map[lane.ID]string, len(ids)), make(map[lane.ID]string, len(ids))
	for _, id := range ids {
		s := id.String()
		kin[id] = markTokenOf(seed, s)[:10]
		token[id] = kin[id] + tailOf(nonce, s)
	}
	return kin, token
}

// markToken is the token a mark of lane id derives from seed alone.
func markToken(seed string, id lane.ID) string { return markTokenOf(seed, id.String()) }

func markTokenOf(seed, lane string) string {
	h := sha256.Sum256([]byte(seed + lane))
	return "m-" + hex.EncodeToString(h[:12])
}

// offers are the owners a change's delivery takes as its own: those its
// failed deliveries held (Message.Owners).
type offers struct {
	tokens, nonces map[string]bool
}

func (o *offers) add(owners []string) {
	for _, v := range owners {
		if v == "" {
			continue
		}
		if o.tokens == nil {
			o.tokens, o.nonces = map[string]bool{}, map[string]bool{}
		}
		if v[0] == 'n' {
			o.nonces[v] = true
		} else {
			o.tokens[v] = true
		}
	}
}

// holds reports whether owner, which holds lane id, is one of o's.
func (o offers) holds(owner string, id lane.ID) bool {
	if owner == "" || o.tokens[owner] {
		return owner != ""
	}
	if len(owner) != 26 || owner[0] != 'm' {
		return false
	}
	for n := range o.nonces {
		if owner[10:] == markTail(n, id) {
			return true
		}
	}
	return false
}

// heldAfter is what a failed change's copy offers (MessageResult.Owners):
// the nonce of this invocation if it marked the change's lanes, the
// tokens its claims moved the change's lanes to, and what the change's
// own failed deliveries held (carried), most recent first, within
// maxRetryOwners.
func heldAfter(inv *invocation, marked bool, held, carried []string) []string {
	var out []string
	if marked && inv != nil {
		out = append(out, inv.nonce)
	}
	for _, t := range inv.current(held) {
		if !slices.Contains(held, t) { // moved by a claim; the nonce knows the rest
			out = append(out, t)
		}
	}
	for _, v := range carried {
		if v == "" {
			continue
		}
		if v[0] != 'n' {
			v = inv.current([]string{v})[0]
		}
		out = append(out, v)
	}
	seen := map[string]bool{}
	kept := out[:0]
	for _, v := range out {
		if !seen[v] {
			seen[v], kept = true, append(kept, v)
		}
	}
	return kept[:min(len(kept), maxRetryOwners)]
}
