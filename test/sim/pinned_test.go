package sim

import "testing"

// Adversary cases that once failed, replayed as they were drawn. Each
// names what it caught; a replay is close to its first run, not bit-exact
// (goroutine order at one simulated instant), so each failed by far more
// than that drift.
func TestAdversaryPinned(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Case
	}{
		// lease_hold 15m over max_in_flight 1 and a vendor answering in
		// seconds: a push that found the lease held was deferred to its
		// expiry, the crash bound, rather than one push's time, and days
		// were still stale after an hour of drain (limiter
		// TestLeaseBusyAsksAgainWithinAPushsTime).
		{"lease hold far above the push's time", Case{Seed: 9, Parts: []string{"max_in_flight", "lifetime", "retry-after", "slow"}}},
		// A limits[] per-minute window beside a per-second limit that
		// 429s (halving) and an outage emptied: the multi-bucket
		// reservation charged the window at the call's now and spent it
		// at the per-second bucket's later slot, so the window's sends
		// came at the per-second pace (limiter
		// TestMultiReserveChargesEveryBucketAtTheCommonSlot). Its
		// local-share and db-outage parts may also put a local push beside
		// the shared bucket's grants while a breaker stays open after the
		// outage, as local-share documents: the vendor checks that within
		// the mode's own bound (TestVendorChecksLocalSharesAgainstTheirDocumentedBound).
		{"extra window charged before its slot", Case{Seed: 20, Parts: []string{"margin", "limits", "local-share", "lifetime", "big-answers", "halving", "db-outage"}}},
		// minidyn applied an update's SET actions in order, where
		// DynamoDB evaluates each on the item before: the limiter's lane
		// tag was one grant ahead of the tat its write left, and a call
		// whose answer was lost rebuilt its slots from it, one batch
		// late, over the next grant's: a window at 101% in one run of
		// two (TestDBEvaluatesEveryActionOnTheItemBefore).
		{"slots rebuilt after a lost answer", Case{Seed: 8, Parts: []string{"adaptive", "kinds_per_message", "db-outage", "lost-answers", "lambda-deaths", "clock-skew", "many-connections"}}},
		// A change whose mark's answer was lost, retried after newer
		// changes held all its dates, skipped its mark and so never took
		// back the lane its failed delivery held: the lane waited for a
		// change that never came, 248 days stale in one run of three
		// (syncer TestRetriedChangeTakesItsLaneEvenWhenNewerChangesHoldItsDates).
		{"retried change superseded by newer ones", Case{Seed: 71, Parts: []string{"margin", "adaptive", "items", "urgent", "local-share", "throttle", "push_timeout", "hang", "big-answers", "lost-answers", "storm", "hot-property"}}},
		// A vendor that halves its limit answers 429s with Retry-After:
		// slots the fleet booked before (deferred jobs', batches') were
		// spent inside the silence, since a penalty delays only the grants
		// made after it (20 requests inside it; seeds 20, 24 and 67 did the
		// same). Slots booked ahead now ask the bucket's silence first
		// (limiter TestSlotBookedBeforeA429IsNotSpentInItsSilence).
		{"slot booked before a 429 spent inside its silence", Case{Seed: 15, Parts: []string{"halving"}}},
		// A penalty box's 429 (Retry-After of a day, 15 minutes to the
		// client) answered 2 s into a 30 s outage of the store: its write
		// failed and was only logged, so no other worker knew, and after
		// the outage the fleet sent 169 requests inside the silence, in 3
		// runs of 30 (4 of 30 at f768b7a^ too). The push client now asks the
		// store again within its budget, past an open breaker (otapush
		// TestThrottleIsRecordedOnceTheStoreAnswers, sim
		// TestPenaltyPassesAnOpenCircuitBreaker).
		{"429 heard while the store was out", Case{Seed: 74, Parts: []string{"max_bytes", "lifetime", "push_timeout", "linger", "retry-after", "slow", "db-outage", "lost-answers", "penalty-box", "strict-slow-store", "remap"}}},
		// A resync's bulk push books its bucket with a burst of 1, which a
		// bucket with leased shares refuses (the leases' tokens come out
		// of the burst): every bulk push of that endpoint was dead-lettered
		// as an invalid limit, 386 days stale (syncer TestBulkRoute).
		{"bulk push on a bucket with leased shares", Case{Seed: 23, Parts: []string{"resync", "share"}}},
		// With split_by month, a change crossing a month goes as two
		// messages; the first went on the push's slot and the second had
		// to book a token past the push's budget, so the job deferred it.
		// The element stayed pending whole, so every later push sent the
		// first month again on its slot and the second never went: 3,712
		// days stale after an hour (syncer
		// TestAcceptedMonthsOfAChangeAreNotSentAgain). Three of the twelve
		// parts drawn keep it: a 2 s push budget, and 64 connections a
		// property on one bucket, whose tokens are then booked seconds
		// ahead. Without the fix 1,740 days were stale and 192 messages
		// still queued after the hour; with it the case takes 3-4 s of
		// CPU where the twelve parts took 20.
		{"accepted month sent again on every slot", Case{Seed: 41, Parts: []string{"split_by", "push_timeout", "many-connections"}}},
		// A later message of a push on a limits[] route waits for every
		// bucket at once (WaitMulti), which slept to a common slot booked
		// seconds ahead on a busy bucket and sent it without asking for a
		// silence: 1 request 2 s into a 5 s Retry-After. WaitMulti now
		// checks it as Wait does (limiter
		// TestWaitMultiSlotBookedBeforeA429IsNotSpentInItsSilence, on the
		// emulator, fails every run without it; this case 1 run in 5).
		{"multi-bucket slot spent inside a silence", Case{Seed: 39, Parts: []string{"limits", "big-answers", "penalty"}}},
		// Where a channel speaks an XML format, availability is the room
		// type's (no rate plan), but the resync part seeded and resynced
		// it at room × plan: the resync pushed the seeded cell DBL/BAR,
		// which the OTA holds as the room's one availability that live
		// changes of DBL/ had set newer (seed 9: seq 1 over 6, 0.3 s
		// after the resync, for good), or left days stale (seed 3: 179;
		// seed 25: 31 never delivered). A defect of the simulation, not
		// of the pipeline: its seed and resync now name the cells live
		// changes write (onboard.go, hasPlan).
		// An endpoint metered by items whose vendor halved its limit below
		// a push's items (7 against a burst of 5) and answered every try
		// 429 with Retry-After 0: the lane's job failed 9 pushes in a row
		// and was dead-lettered for throttles, naming no change, and 403
		// days stayed stale. A throttled request now goes smaller (half its
		// items, job.Fit), a Retry-After of 0 waits the bucket's interval,
		// and throttles never dead-letter a job (dispatch
		// TestItemsPushTheVendorCannotTakeIsSentSmaller).
		{"items push larger than a halved vendor takes", Case{Seed: 84, Parts: []string{"items", "halving", "slow-store"}}},
		// A slow vendor past a 2 s push budget applied pushes whose answers
		// came too late: a lane's job failed 9 pushes in a row and was
		// dead-lettered, its lane kept for the sweep's 15-minute backoff,
		// while the OTA held every day. The drain ended on the ledger's
		// freshness alone, and the final sweep found the lane (1 run in 8
		// to 10). The drain now also waits for the sweep index to empty,
		// which TestDrainWaitsForALaneLeftToTheSweep checks every run.
		{"lane left to the sweep while the OTA is fresh", Case{Seed: 63, Parts: []string{"urgent", "limits", "push_timeout", "linger", "retry-after", "vendor-in-flight", "slow", "db-outage", "lost-answers", "hot-property", "refuse-hotel", "slow-store", "resync", "share"}}},
		// A 20/s bucket of burst 1 with a calendar quota keeps no margin,
		// and the dispatcher let a held slot be spent up to 100 ms late
		// there (two intervals): a lingering batch's first slot, answered
		// 45-85 ms after the now its write claimed, went beside the next
		// two, 3 requests in 28-49 ms against burst 1 + 1 + 20·W, about 1
		// run in 22. The grace without a margin is half the burst's refill,
		// at least one interval (not 100 ms): one interval here (dispatch
		// TestGraceIsBoundedByTheMargin, TestHeldSlotLeavesWithinItsLatenessBound),
		// and a lingering slot is booked ahead by the store's latency
		// (dispatch TestLingeringSlotsAreBookedAheadOfTheStoresLatency), so
		// it is not late at the source.
		{"held slot spent two intervals late without a margin", Case{Seed: 21, Parts: []string{"quota", "split_by", "lifetime", "throttle", "linger", "duplicates", "hot-property", "secrets-outage", "bulk-lane", "disconnect", "resync"}}},
		{"resync of availability at a rate plan the OTA has not", Case{Seed: 9, Parts: []string{"refuse-hotel", "resync"}}},
		{"resync of availability at a rate plan beside malformed XML", Case{Seed: 3, Parts: []string{"malformed-xml", "resync"}}},
		{"resync of availability at a rate plan beside parity", Case{Seed: 25, Parts: []string{"parity", "resync"}}},
		// A whole-connection resync read availability on a json channel at
		// every room type × rate plan its mapping names, but the PMS sends
		// it per room type (as where a channel speaks an XML format), and
		// json pushes the cell as the PMS keys it: the room type's own
		// cell was never read, 104 days stale. A whole resync now reads
		// each room type alone too, as a sparse cell (resync
		// TestWholeResyncReadsEachKindByItsFormatsKey).
		{"whole resync of per-room-type availability on json", Case{Seed: 9, Parts: []string{"refuse-hotel", "resync-whole"}}},
		// Bulk elements go in date order; on an endpoint metered by items a
		// push that could pay for part of its first element sends its first
		// dates and the next push resumes the rest. The rest, from a later
		// date, sorted behind other cells' elements, so the next push split
		// another element and the first one's part was forgotten: the same
		// dates again and again, 1,672 bulk pushes for 48 days delivered,
		// jobs that never ended. A resumed part keeps its element's place
		// (syncer TestForClass).
		{"bulk part resumed behind another element", Case{Seed: 71, Parts: []string{"items", "storm", "strict-slow-store", "resync-whole"}}},
		// quota-5xx sized booking's hourly quota (18) to 13 lanes of one
		// request; strict-slow-store then put all 26 properties behind one
		// credential, and refuse-hotel wired OpenTravel, one request per
		// calendar month (4 a lane): 104 requests, six periods, against a
		// drain of three. 9 lanes were still deferred to the next reset
		// when the run ended, each drained by 5 h with a longer one. A
		// defect of the simulation: the drain is now derived from every
		// quota once the parts are drawn (adversary_quota.go,
		// TestQuotaDrainHoldsOnePushOfEveryLane).
		// An OpenTravel vendor refusing an unmapped room's changes in
		// whole messages, naming none, answering in seconds (seed 7), or
		// behind a 0.5/s bucket of 64 connections a property (seed 32):
		// isolating a lane's refused changes took more requests than one
		// push sends within its budget, and each next push began from the
		// whole lane again, refused and split the same halves, and ended
		// at the same depth. Lanes stayed dirty for hours (seed 7: 24
		// changes re-sent every 21 s for 2 h) or were given up after 9
		// pushes that isolated without settling (seed 32). The parts a
		// push did not send now go apart in the next (syncer
		// TestRefusalPartsNotSentGoApartInTheNextPush, dispatch
		// TestTakenApartButNoPartSentIsNotAFailedPush).
		{"isolation longer than a push, a slow vendor", Case{Seed: 7, Parts: []string{"slow", "refuse-item", "hang-lease"}}},
		{"isolation longer than a push, a slow bucket", Case{Seed: 32, Parts: []string{"many-connections", "refuse-item", "penalty"}}},
		{"quota drain shorter than a month a request needs", Case{Seed: 35, Parts: []string{"refuse-hotel", "quota-5xx", "strict-slow-store"}}},
		// max_bytes 1024 halved each rates push on JSON into four bodies
		// or so, and the drain counted one a lane: airbnb's hourly quota
		// of 11 per credential sent 44 requests in the load's period and
		// three more, every one the quota allowed, and 3-7 days were still
		// stale, one job deferred to the next reset, in every run of
		// three. A defect of the simulation: the drain now counts the
		// bodies max_bytes halves a push into (adversary_quota.go,
		// TestQuotaDrainHoldsOnePushOfEveryLane). Seed 95 (expedia, 9 an
		// hour, max_bytes 2048) failed the same way.
		{"quota drain shorter than max_bytes' halves", Case{Seed: 189, Parts: []string{"quota", "max_bytes", "refuse-item", "quota-5xx"}}},
		// A shadow channel pushes at once, and the drain skipped its
		// quota; but the vendor still took 60 an hour an endpoint and
		// answered 429 past that to the period's end. OpenTravel under
		// max_bytes 1024 halves a push into bodies of a day or two, and 18
		// lanes were still deferred to the next reset when the 2 h 12 min
		// drain ended, about 800 days stale in 3 runs of 3. A defect of
		// the simulation: the drain now holds a shadow channel's quota too
		// (adversary_quota.go, TestQuotaDrainHoldsOnePushOfEveryLane);
		// drained by 6 h 5 min in 3 runs of 3.
		{"quota drain that skipped a shadow channel", Case{Seed: 916, Parts: []string{"quota", "limits", "shadow", "max_bytes", "format", "strict-slow-store"}}},
		// A penalty box's 429 asked a day's silence of expedia's bucket,
		// written by the environment that met it; another environment
		// held a lease of the bucket and, last answered about the item
		// before the 429, sent on it inside the silence: 6-9 requests in
		// 3 runs of 3. A lease now grants only once its process heard
		// from the item within SilenceAfter (limiter
		// TestALeaseReadsASilenceWrittenSinceItsProcessLastHeard).
		{"lease spent inside a silence another environment wrote", Case{Seed: 1093, Parts: []string{"slow", "penalty-box", "share"}}},
		// A 429 asked 15 minutes of silence of a sharded bucket, and the
		// store went down 35 s later: the dispatcher paced its jobs from
		// the local share, which knows nothing of the penalty that kept
		// the shared bucket silent, and sent requests inside the silence
		// (dispatch TestLocalShareWaitsOutAKnownSilence).
		{"local share inside a silence it knew", Case{Seed: 234, Parts: []string{"shards", "local-share", "retry-after", "db-outage", "lost-answers", "many-connections", "penalty"}}},
		// A 2-minute store outage failed a change at most 4 deliveries in a
		// row, but duplicate receives of its messages each sent a copy of
		// their own: 3 lines of copies, 11 sends in all, over a bound that
		// counted one line (wireCheck counts one per duplicate delivery).
		// A bulk upload to two room types (DBL, TWN) of a hotel resynced
		// whole, beside a load of one: the hotel's connections mapped the
		// load's and onboarding's codes alone, and the pipeline rightly
		// dead-lettered TWN's 300 days on both rates channels as an
		// unmapped room type, 600 days stale every run. A defect of the
		// simulation: the mapping now names every wave's codes (run.go
		// codesUsed, TestWholeResyncMapsEveryCodeTheRunSends).
		{"bulk upload to a room the whole resync's mapping left out", Case{Seed: 249, Parts: []string{"adaptive", "bulk-lane", "resync-whole"}}},
		// refuse-item keeps its refusals off a channel with a calendar
		// quota, but quota-5xx, drawn after it, put booking's 6 an hour on
		// the channel refusing hotel p2's DBL: isolating the refused
		// changes spent 32 of the 57 requests credential c0 sent in five
		// periods, and p4's and p6's restrictions (same credential) were
		// still deferred to the next reset 4 h after the load, in 3 runs
		// of 3. A defect of the simulation: quota-5xx now draws among the
		// channels that refuse no item (TestNoQuotaOnAChannelThatRefusesItems).
		{"quota drawn on a channel refusing an unmapped room", Case{Seed: 264, Parts: []string{"kinds_per_message", "lifetime", "push_timeout", "retry-after", "5xx", "refuse-item", "quota-5xx", "parity"}}},
		{"duplicate deliveries of a change failing in an outage", Case{Seed: 283, Parts: []string{"items", "max_in_flight", "urgent", "kinds_per_message", "push_timeout", "linger", "unauthorized", "slow", "db-outage", "lost-answers", "duplicates", "clock-skew", "storm", "bulk-lane"}}},
		// A bulk upload's lane behind a vendor hanging for half an hour,
		// then about 30 pushes (a slow OpenTravel vendor, one request in
		// flight, max_bytes' halves), each in its own invocation, 20% of
		// which die (share's churn): each death hid the lane's job for the
		// visibility timeout (6 min), 3-5 of them after the hang, and 8 runs
		// of 10 ended the 1 h drain with 195-419 days stale. A defect of
		// the simulation: the drain now grants a visibility timeout per
		// death the lane that met the most deaths met (deaths.go).
		{"push chain's deaths after a half-hour hang", Case{Seed: 44, Parts: []string{"max_bytes", "slow", "format", "hang-lease", "bulk-lane", "share"}}},
		// An OpenTravel vendor answering in seconds refused an unmapped
		// room's changes in whole messages: isolating 22 of a lane's
		// changes took 36-38 requests over a minute, and the call's
		// context ended the push before it settled anything. The refused
		// change it had found was dead-lettered again on every try, the
		// accepted parts stayed pending, and the message came back after
		// the visibility timeout to begin the same isolation whole: 2-6
		// invocations ran into the function timeout and 14 days of a
		// mapped room stayed stale, in 4 runs of 5. A push's later
		// messages now end DeadlineMargin before the call's deadline and
		// the push settles (dispatch
		// TestLaterMessagesEndBeforeTheDeadlineMargin).
		{"isolation cut by the invocation's deadline", Case{Seed: 214, Parts: []string{"shards", "lifetime", "throttle", "slow", "refuse-item", "strict-slow-store", "disconnect"}}},
		// An endpoint metered by items whose vendor takes one request at
		// a time per credential and answers in a second or more, no
		// max_in_flight configured: the fleet's requests met the cap, and
		// each push throttled to its end halved its lane's requests
		// (job.Fit), though the vendor took requests of that size every
		// few seconds. Lanes went down to a day or two a request, each
		// needing that many more, which met the cap again: 2.5-2.6 items
		// a request, about 3,300 429s, 790-930 days stale and 43-47
		// messages queued after an hour, in 4 runs of 4. A throttle no
		// longer halves a size the vendor took of the bucket within a
		// minute (dispatch TestAThrottleOfASizeTheVendorTookLeavesFitAlone).
		{"lane requests halved by a vendor's concurrency cap", Case{Seed: 209, Parts: []string{"items", "vendor-in-flight", "slow", "many-connections"}}},
		// The same vendor (one request at a time per credential, 1-8 s
		// answers, no max_in_flight) on an adaptive bucket of 5/s: every
		// 429 silenced the bucket, revoking the fleet's slots, and after
		// it several environments sent at the bucket's rate again, most
		// into the cap: 886-1,036 requests, 320-350 429s, 561-929 days
		// stale and 25-32 messages queued after the drain, 3 runs of 3 on
		// main at 1b6ccb2. A throttle met with other requests of the
		// bucket at the vendor now lowers a cap the fleet learns, under
		// which every push takes a lease (dispatch
		// TestAConcurrencyThrottleLowersTheCapAndLeavesFitAlone, limiter
		// TestLowerInFlightWritesOnlyWhatItLowers): drained by 49m-1h15m,
		// 165-224 429s, 3 runs of 3.
		{"undeclared concurrency cap under an adaptive bucket", Case{Seed: 209, Parts: []string{"margin", "adaptive", "items", "meter", "local-share", "split_by", "linger", "ratelimit-fields", "vendor-in-flight", "slow", "big-answers", "5xx", "lambda-deaths", "many-connections", "malformed-xml", "secrets-outage", "resync"}}},
		// A vendor with a concurrency cap of 1 the config does not name,
		// asking a day of every 429 (penalty-box "huge"): at each
		// silence's end every lane of the bucket was due at once, the
		// first request took the cap and the second silenced the bucket
		// for the client's 15 minutes again, one request a bucket a
		// quarter hour, and 788 days were stale at the 4 h drain, every
		// run. A defect of the oracle: its drain now counts a silence per
		// request of every lane's push where the vendor caps concurrency
		// (silenceDrain, TestSilenceDrainHoldsEverySilence).
		{"hidden concurrency cap asking a day of each 429", Case{Seed: 332, Parts: []string{"throttle", "vendor-in-flight", "format", "penalty-box"}}},
		// A shadow route (airbnb, its vendor halved to 1/s) isolating a bulk
		// lane's unmapped room: the route books no token to wait for, so
		// the refused message's parts went at once, refused and 429 in
		// turn, ~55 requests an invocation until the Lambda's deadline,
		// and 2-3 invocations a run ran into the function timeout (4 runs
		// of 5 before bfe9d8c). Seed 214's fix: a push's later messages
		// end DeadlineMargin before the call's deadline (dispatch
		// TestLaterMessagesEndBeforeTheDeadlineMargin); a shadow route's
		// isolation reaches it without waiting for a token.
		{"shadow route's isolation running into the function timeout", Case{Seed: 358, Parts: []string{"shadow", "halving", "refuse-item", "bulk-lane"}}},
		// An hourly quota of 60 on 50 lanes a credential at 3 requests,
		// beside a vendor halving its 2/s to 1/s: the fleet spends a token
		// of the count on each 429, 23-27 of each hour's 60, and the drain
		// held three periods where the lanes needed five (159-232 days stale
		// at 4 h 10 min). A defect of the oracle: a quota's drain now counts
		// half its count for pushes on a halving vendor (adversary_quota.go).
		{"quota spent on a halving vendor's 429s", Case{Seed: 367, Parts: []string{"slow", "halving", "lost-answers", "clock-skew", "storm", "many-connections", "malformed-xml", "quota-5xx"}}},
		// 100 lanes a credential on 0.5/s, burst 1, 5% overload and a day's
		// Retry-After: sends within the limiter's rate·λ drew as many 429s
		// as the overload, 8-14 fifteen-minute silences a bucket where the
		// overload alone draws about 6, and past 16 the 4 h drain ended
		// with 86 days stale. A defect of the oracle: the drain now lasts as
		// long as the busiest bucket's silences (run.go's drainTime).
		{"silences of a bucket of burst 1 past a 4 h drain", Case{Seed: 317, Parts: []string{"many-connections", "penalty", "penalty-box", "strict-slow-store"}}},
		// On an endpoint metered by items (5 tokens/s, burst 10, 2 a
		// day) a push carried the whole changes its tokens paid for, so
		// changes over the same weeks each sent the shared dates again:
		// 14 lanes held 8,223 items in their changes, 932 distinct, sent
		// in 2,021 requests, and the hour's drain ended with 23 dates
		// stale (2 of 2 runs). The owner now merges them after its claim
		// (TestOverlappingChangesOfAnItemsLaneGoOnce): 510
		// requests, drained by 16.5 min.
		{"overlapping changes of an items lane sent once each", Case{Seed: 558, Parts: []string{"items", "strict-slow-store"}}},
		// The same beside a vendor that hangs for half an hour and then
		// answers 5% of requests 429 with 2 minutes of silence: the
		// lanes' repeated dates (147 items in one lane's changes, 52
		// distinct) met a silence every 20 requests and 9-11 days were
		// still stale at the hour (3 of 5 runs); merged, drained by 51 min.
		{"overlapping changes of an items lane under a vendor's penalties", Case{Seed: 559, Parts: []string{"items", "meter", "hang-lease", "penalty", "slow-store"}}},
		// A code unmapped by the operator (remap) on an endpoint metered by
		// items, in expedia-ar: a push's first render dead-lettered the
		// changes of the unmapped room and kept them for its Done to
		// clear; its bucket had fewer tokens than its items, and Shrink
		// took the oldest changes, those alone. With no expedia-ar message
		// left, the push went as its JSON render, which carries no
		// credential: a request to booking without its credential's token
		// in 4 runs of 6 at f0e03de. Shrink now keeps the dead-lettered
		// changes at no cost and fills with the live ones (syncer
		// TestShrinkSkipsDeadLetteredChanges).
		{"shrunk push left with only dead-lettered changes", Case{Seed: 663, Parts: []string{"items", "property_share", "big-answers", "5xx", "hot-property", "format", "strict-slow-store", "remap"}}},
		// Seed 696's smallest parts drawn from seed 18 (items at weight
		// 0.5, 2/s, burst 10, against a vendor that halves): 8 tokens a
		// deferred job booked ahead at 2/s before a throttle halved the
		// rate to 1/s were confirmed at their slot, the rate climbed back
		// by then, and spent beside 5 booked at 1/s in between: 13 tokens
		// in one second over burst 10 + 2, 8 runs of 8 (limiter
		// TestConfirmRevokesASlotAHalvingSlowedOnceTheRateClimbsBack).
		{"slot booked before a halving spent once the rate climbed back", Case{Seed: 18, Parts: []string{"adaptive", "items", "halving", "strict-slow-store"}}},
		// A store outage delayed restriction changes 73 (value 9), 78,
		// 142 (302) and 158 (9 again) of one day, and the store applied
		// them in order over 160-205 s; booking speaks XML, which carries
		// values alone, and the oracle named each value by the newest
		// change published with it: 73's 9 read as 158's, and the next
		// push's 78 or 142 as an older state over it (4 runs of 6, 2 min
		// 41 s). Each value may be any change that published it, and a
		// day went back only if no choice is in order (sim
		// TestLedgerReadsARepeatedValueAsAnyOfItsChanges).
		{"value a later change repeated read as the later one", Case{Seed: 1149, Parts: []string{"db-outage", "storm", "hot-property", "parity"}}},
		// A resync beside the load on expedia metered by items (5/s,
		// burst 10, max_items 31): each bulk element a cell's 31 days,
		// every push 9 items of it. SQS duplicates made a lane's bulk job
		// twice; each copy, granted its token, claimed the lane from the
		// other's parked chain, dropping the parts that chain carried, so
		// 28 bulk jobs on one lane sent an element's first 9 days at each
		// push for the hour and March never went (49-60 days stale, 34,541
		// bulk jobs for 230 deliveries, every run). A parked chain is now
		// left to itself (syncer unpushed;
		// TestBulkElementLargerThanTheBurstReachesEveryDayWithADuplicateJob).
		{"bulk element re-sent from its first days by a duplicate bulk job", Case{Seed: 1205, Parts: []string{"items", "duplicates", "strict-slow-store", "resync"}}},
		// Seed 820: a mapping put back (booking's BAR, left out for 20 s)
		// sent its resync at once, and workers whose cache of connections
		// still held the mapping without BAR skipped every BAR cell as
		// unmapped; the hotel's whole resync had skipped them the same way
		// while BAR was out, so 43 days stayed at nothing on booking (4 of
		// 4 runs, with the resync sent at once). The resync a connection's
		// write sends now waits on the queue until every worker's cache
		// holds the write (resync.TriggerDelay;
		// TestMappingFixResyncWaitsForEveryWorkersCache).
		{"mapping fix resynced on a cache from before it", Case{Seed: 820, Parts: []string{"parity", "remap", "resync-whole"}}},
		// Seed 1475: a shadow route metered by items pushed a message's
		// further items, and retries, on tokens the push client waited for
		// in a bucket the shadow pushes had booked minutes ahead: every
		// push deferred 7-9 minutes, 12 pushes in 5 hours, 681 days stale
		// (3 of 3 runs; 2 of 2 on 7de08a5). A shadow request now draws no
		// token of its own (otapush.Request.Shadow;
		// TestShadowRequestDrawsNoToken).
		{"shadow push waiting for tokens its bookings took", Case{Seed: 1475, Parts: []string{"adaptive", "items", "shadow", "lambda-deaths", "strict-slow-store"}}},
		// Seeds 643 and 1802: a fixed-rate bucket above a vendor that
		// halved its limit, each 429 asking a day (the client's 15
		// minutes): after each silence the vendor refused one of the
		// bucket's first requests (643: three shards freeing their tokens
		// at one instant; 1802: every lane's first push over the halved
		// burst), one request a silence, days stale. A refusal right
		// after a silence now puts the bucket on probation: its slots
		// spaced, its shards' silences staggered, its requests by items
		// sized to the spaced capacity (gcra TestNextProbation, integration
		// TestThrottleRefusedRightAfterASilencePutsABucketOnProbation,
		// dispatch TestRequestsOnProbationAreSizedToTheSpacedCapacity,
		// otapush TestSiblingSilencesAreStaggeredOnProbation).
		{"fixed rate refused right after its silence, sharded", Case{Seed: 643, Parts: []string{"margin", "shards", "adaptive", "items", "kinds_per_message", "retry-after", "unauthorized", "halving", "db-outage", "lambda-deaths", "hot-property", "many-connections", "hang-lease", "slow-store", "quota-5xx", "parity", "resync"}}},
		{"fixed rate refused right after its silence, by items", Case{Seed: 1802, Parts: []string{"items", "retry-after", "halving", "slow-store"}}},
		// Seed 427: a push on booking's items-metered endpoints (burst 4,
		// 2/s, margin 100 ms: 3 tokens a request) holding a slot of 1
		// token, whose format split it into messages, the first of one
		// item and a later one over the 3 a request may carry: charge
		// rendered it again to 3 items, all on the slot's 1 token, and
		// half a second after a push of 3 on 3 tokens the vendor counted
		// 6 items where it allows 5 (1 run in 4). A push rendered again
		// now carries what its tokens pay for (dispatch
		// TestAPushRenderedAgainCarriesWhatItsTokensPayFor).
		{"push rendered again past what its slot paid for", Case{Seed: 427, Parts: []string{"items", "max_bytes", "retry-after", "slow", "refuse-item", "malformed-xml", "penalty-box", "strict-slow-store", "resync-whole", "deferred-deaths"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if why, ok := pinnedOpen[tt.name]; ok {
				t.Skip("known open finding: " + why)
			}
			t.Parallel()
			for run := range max(pinnedRuns[tt.name], 1) {
				if v := verdict(runCase(t, tt.c)); v != "" {
					t.Fatalf("%s (replay: %s; run %d):\n%s", tt.name, tt.c.Replay(), run+1, v)
				}
			}
		})
	}
}

// pinnedRuns replays a pinned case whose failure hangs on goroutine order
// at one simulated instant that many times, failing on any run.
//
// Seed 21's case (12 runs of about 270 failed without its fix) runs
// once, since dispatch's TestGraceIsBoundedByTheMargin ("no margin: one
// interval, even under the process's own latency") fails every run
// without it. Seed 1149's failed 4 runs of 6 without its fix (a push
// between two store writes 30 s apart): three runs miss it about 1 time
// in 27.
var pinnedRuns = map[string]int{"value a later change repeated read as the later one": 3}

// pinnedOpen are pinned cases that fail again now and then, each naming
// what it found; skipped visibly until traced, as knownOpen's seeds are.
var pinnedOpen = map[string]string{
	// Its own-process causes are fixed and fail deterministically when
	// reverted (dispatch TestLocalShareWaitsOutAKnownSilence, limiter
	// TestKnownSilenceKeepsAPenaltyWhoseWriteFailed). What is left is the
	// gap design.md states for local-share: traced on a run that failed
	// (1 of 40 after both fixes), environment 2 heard the 429 at 24.3 s
	// and wrote the silence to the bucket's three shards by 24.43 s;
	// environment 1's last store answer about the bucket was at 21.5 s,
	// and it pushed on its local share during the outage at 50.7 s.
	"local share inside a silence it knew": "fails about 1 run in 40: a silence another instance heard, and this one had not read, is unknown to its local share while the store is out (design.md, local-share)",
}
