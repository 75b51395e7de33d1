package sim

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// Message is one SQS message as a receiver gets it.
type Message struct {
	ID, Body string
	Attrs    map[string]string
	Receives int
	SentAt   time.Time
	entry    *entry
}

// entry is a message's place in its queue; a duplicate delivery is a
// second entry with the same ID.
type entry struct {
	msg       *Message
	visibleAt time.Time
	gen       int // bumped whenever visibleAt changes or it is deleted
	deleted   bool
}

type slot struct {
	at  time.Time
	e   *entry
	gen int
}

type slots []slot

func (s slots) Len() int           { return len(s) }
func (s slots) Less(i, j int) bool { return s[i].at.Before(s[j].at) }
func (s slots) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s *slots) Push(x any)        { *s = append(*s, x.(slot)) }
func (s *slots) Pop() any          { old := *s; x := old[len(old)-1]; *s = old[:len(old)-1]; return x }

// SQS is every queue of the run: delays, visibility timeouts, batches, a
// redrive to the dead-letter queue after MaxReceive receives, and a
// chance that a receive hands a message out twice (SQS is at least once).
type SQS struct {
	mu         sync.Mutex
	rng        *rand.Rand
	latency    Latency
	dupChance  float64
	maxReceive int
	queues     map[string]*Queue
	// Requests counts billed requests (one per 64 KB of each call), and
	// ByCall the same by queue and call.
	Requests int
	ByCall   map[string]int
	nextID   int
	dlq      *Queue
	// laneTrace, if set, records every message sent (lanetrace.go).
	laneTrace *laneTrace
	// duplicated, if set, hears every message a receive hands out a
	// second time, under the lock.
	duplicated func(q *Queue, m *Message)
	// late is the most a delayed message is late by, as a share of its
	// delay (Faults.LateDeliveries), drawn with lateRNG.
	late    float64
	lateRNG *rand.Rand
}

// Queue is one queue.
type Queue struct {
	Name       string
	Visibility time.Duration
	ready      slots
	live       int // entries not deleted
	// Dead are the dead-letter queue's messages: sent with a reason or
	// moved by the redrive.
	Dead []Message
	// arrived wakes a poller waiting on an empty queue (Arrival).
	arrived chan struct{}
}

// NewSQS is a set of queues whose calls take lat, where a receive hands a
// message out a second time with probability dup.
func NewSQS(r *rand.Rand, lat Latency, dup float64, maxReceive int) *SQS {
	return &SQS{rng: r, latency: lat, dupChance: dup, maxReceive: maxReceive, queues: map[string]*Queue{}, ByCall: map[string]int{}}
}

// Create adds a queue; its URL is its name. The first one named "dlq" is the
// redrive target.
func (s *SQS) Create(name string, visibility time.Duration) *Queue {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := &Queue{Name: name, Visibility: visibility, arrived: make(chan struct{}, 1)}
	s.queues[name] = q
	if name == "dlq" {
		s.dlq = q
	}
	return q
}

func (s *SQS) wait(ctx context.Context) error {
	s.mu.Lock()
	d := s.latency.draw(s.rng)
	s.mu.Unlock()
	return sleep(ctx, d)
}

// SendMessage is queue.SQSAPI's one method.
func (s *SQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	body := aws.ToString(in.MessageBody)
	if len(body) > 1<<20 {
		return nil, &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "message over 1 MiB"}
	}
	attrs := map[string]string{}
	for k, v := range in.MessageAttributes {
		attrs[k] = aws.ToString(v.StringValue)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bill(aws.ToString(in.QueueUrl)+" SendMessage", 1+len(body)/(64<<10))
	q, ok := s.queues[aws.ToString(in.QueueUrl)]
	if !ok {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String(aws.ToString(in.QueueUrl))}
	}
	id := s.put(q, body, attrs, time.Duration(in.DelaySeconds)*time.Second)
	return &sqs.SendMessageOutput{MessageId: &id}, nil
}

// SendMessageBatch is syncer.RetryAPI's one method: up to 10 messages in
// one request.
func (s *SQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	size := 0
	for _, e := range in.Entries {
		size += len(aws.ToString(e.MessageBody))
	}
	s.bill(aws.ToString(in.QueueUrl)+" SendMessageBatch", 1+size/(64<<10))
	q, ok := s.queues[aws.ToString(in.QueueUrl)]
	if !ok {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String(aws.ToString(in.QueueUrl))}
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		attrs := map[string]string{}
		for k, v := range e.MessageAttributes {
			attrs[k] = aws.ToString(v.StringValue)
		}
		id := s.put(q, aws.ToString(e.MessageBody), attrs, time.Duration(e.DelaySeconds)*time.Second)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(id)})
	}
	return out, nil
}

// Put sends a message without latency or billing, for the PMS's own
// stream (EventBridge's delivery is billed apart: see Report).
func (s *SQS) Put(q *Queue, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bill(q.Name+" EventBridge delivery", 1)
	s.put(q, body, nil, 0)
}

func (s *SQS) put(q *Queue, body string, attrs map[string]string, delay time.Duration) string {
	s.nextID++
	id := fmt.Sprintf("m%d", s.nextID)
	now := time.Now()
	m := &Message{ID: id, Body: body, Attrs: attrs, SentAt: now}
	s.laneTrace.put(q.Name, id, body, delay)
	if q == s.dlq {
		q.Dead = append(q.Dead, *m)
		return id
	}
	if s.late > 0 && delay > 0 {
		delay += time.Duration(s.lateRNG.Float64() * s.late * float64(delay))
	}
	s.enqueue(q, m, now.Add(delay))
	return id
}

func (s *SQS) enqueue(q *Queue, m *Message, at time.Time) {
	e := &entry{msg: m, visibleAt: at}
	q.live++
	heap.Push(&q.ready, slot{at: at, e: e})
	select {
	case q.arrived <- struct{}{}:
	default:
	}
}

// Arrival waits until a message is sent to q (or ctx ends): a poller of
// an empty queue sleeps on it instead of polling a simulated day away.
func (s *SQS) Arrival(ctx context.Context, q *Queue) error {
	select {
	case <-q.arrived:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Receive takes up to n visible messages, hiding each for the queue's
// visibility timeout. A message received more than maxReceive times goes
// to the dead-letter queue instead, with the redrive as its reason.
func (s *SQS) Receive(q *Queue, n int) []*Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var out []*Message
	for len(out) < n && q.ready.Len() > 0 && !q.ready[0].at.After(now) {
		sl := heap.Pop(&q.ready).(slot)
		if sl.e.deleted || sl.gen != sl.e.gen {
			continue
		}
		m := sl.e.msg
		if m.Receives >= s.maxReceive {
			s.drop(q, sl.e)
			dead := *m
			dead.Attrs = map[string]string{"reason": fmt.Sprintf("redrive: received %d times (maxReceiveCount)", m.Receives)}
			s.dlq.Dead = append(s.dlq.Dead, dead)
			continue
		}
		m.Receives++
		sl.e.gen++
		sl.e.visibleAt = now.Add(q.Visibility)
		heap.Push(&q.ready, slot{at: sl.e.visibleAt, e: sl.e, gen: sl.e.gen})
		cp := *m
		cp.entry = sl.e
		out = append(out, &cp)
		if s.rng.Float64() < s.dupChance {
			// At least once: the same message again, soon, to another poller.
			dup := *m
			s.enqueue(q, &dup, now.Add(time.Duration(s.rng.IntN(2000))*time.Millisecond))
			if s.duplicated != nil {
				s.duplicated(q, m)
			}
		}
	}
	if len(out) > 0 {
		s.bill(q.Name+" ReceiveMessage", 1)
	}
	return out
}

// Delete removes received messages (a DeleteMessageBatch per 10).
func (s *SQS) Delete(q *Queue, ms []*Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bill(q.Name+" DeleteMessageBatch", (len(ms)+9)/10)
	for _, m := range ms {
		if m.entry != nil && !m.entry.deleted {
			s.drop(q, m.entry)
		}
	}
}

func (s *SQS) drop(q *Queue, e *entry) {
	e.deleted = true
	e.gen++
	q.live--
}

func (s *SQS) bill(call string, n int) {
	s.Requests += n
	s.ByCall[call] += n
}

// Pending is how many messages the queue holds, delayed and in flight
// included.
func (s *SQS) Pending(q *Queue) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return q.live
}

// NextVisible is when the queue's next message becomes visible (zero if
// none is waiting).
func (s *SQS) NextVisible(q *Queue) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q.ready.Len() > 0 {
		sl := q.ready[0]
		if sl.e.deleted || sl.gen != sl.e.gen {
			heap.Pop(&q.ready)
			continue
		}
		return sl.at
	}
	return time.Time{}
}

// DeadLetters are the dead-letter queue's messages.
func (s *SQS) DeadLetters() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dlq == nil {
		return nil
	}
	return append([]Message(nil), s.dlq.Dead...)
}

// reasonOf is a dead letter's reason attribute.
func reasonOf(m Message) string {
	for k, v := range m.Attrs {
		if strings.EqualFold(k, "reason") || strings.HasSuffix(strings.ToLower(k), "reason") {
			return v
		}
	}
	return ""
}
