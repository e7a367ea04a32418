// Package natsbridge is Lark's optional bridge to NATS JetStream (issue 17, item 7; off unless
// --nats is set): it mirrors stored events to subjects, and it feeds durable subscriptions (pull
// consumers) to handlers with the connection status of 002's disconnection handling.
//
// The database stays the source of truth. Mirroring is best effort and at least once: Mirror never
// blocks or fails the request that published the event; a bounded queue feeds one publisher
// goroutine; JetStream's duplicate window (keyed by the Nats-Msg-Id header "<tenant>:<event id>")
// absorbs a re-mirror; what cannot be published is counted (Dropped) and logged. Subscriptions
// deliver at least once; Message.DeliveryID is stable across redeliveries so the caller can make its
// effect exactly once. docs/events.md ("The NATS JetStream bridge") documents the subjects, headers and statuses.
package natsbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/larkrun/lark/internal/clock"
)

// Defaults of Config.
const (
	DefaultStreamName      = "LARK_EVENTS"
	DefaultSubjectPrefix   = "lark.events"
	DefaultMinBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff      = 30 * time.Second
	DefaultQueueSize       = 4096
	DefaultPublishTimeout  = 5 * time.Second
	DefaultPublishAttempts = 5
	DefaultDedupWindow     = 10 * time.Minute
	DefaultMaxAge          = 7 * 24 * time.Hour
	DefaultDrainTimeout    = 5 * time.Second
)

// Config configures a Bridge. Only URL is required.
type Config struct {
	// URL is the NATS server URL (nats://host:4222; a comma-separated list names several servers).
	URL string
	// StreamName is the JetStream stream that captures "<SubjectPrefix>.>" (default "LARK_EVENTS").
	// Open creates it when missing and adds the subjects to an existing one, leaving its other
	// settings alone.
	StreamName string
	// SubjectPrefix is the first tokens of every mirrored subject (default "lark.events").
	SubjectPrefix string
	// Logger receives connection changes, drops and handler failures (default slog.Default()).
	Logger *slog.Logger
	// Clock stamps connection times and the degraded window (default clock.Real).
	Clock clock.Clock
	// MinBackoff and MaxBackoff bound the exponential reconnect delay; each delay is jittered to
	// between half and all of min(MaxBackoff, MinBackoff·2^(attempt-1)). Defaults 100 ms and 30 s.
	// The publisher's and the subscriptions' retries use the same bounds.
	MinBackoff, MaxBackoff time.Duration
	// QueueSize bounds the mirror queue (default 4096 events); Mirror drops past it.
	QueueSize int
	// PublishTimeout bounds one publish and its acknowledgement by the stream (default 5 s).
	PublishTimeout time.Duration
	// PublishAttempts is how many times the publisher tries one event while connected before it
	// drops it (default 5). While disconnected it waits for the connection instead of counting.
	PublishAttempts int
	// DedupWindow is the stream's duplicate window for a created stream (default 10 min): a re-mirror
	// of the same event within it is not stored twice.
	DedupWindow time.Duration
	// MaxAge bounds how long a created stream keeps messages (default 7 days), so the stream cannot
	// grow without bound.
	MaxAge time.Duration
	// DrainTimeout bounds how long Close spends publishing what is still queued (default 5 s).
	DrainTimeout time.Duration
}

// withDefaults fills the zero fields of cfg.
func (cfg Config) withDefaults() Config {
	str := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	dur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	str(&cfg.StreamName, DefaultStreamName)
	str(&cfg.SubjectPrefix, DefaultSubjectPrefix)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	dur(&cfg.MinBackoff, DefaultMinBackoff)
	dur(&cfg.MaxBackoff, DefaultMaxBackoff)
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = cfg.MinBackoff
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	dur(&cfg.PublishTimeout, DefaultPublishTimeout)
	if cfg.PublishAttempts <= 0 {
		cfg.PublishAttempts = DefaultPublishAttempts
	}
	dur(&cfg.DedupWindow, DefaultDedupWindow)
	dur(&cfg.MaxAge, DefaultMaxAge)
	dur(&cfg.DrainTimeout, DefaultDrainTimeout)
	return cfg
}

// validate checks the names and the prefix.
func (cfg Config) validate() error {
	if cfg.URL == "" {
		return errors.New("natsbridge: no URL")
	}
	if err := validName("stream", cfg.StreamName); err != nil {
		return err
	}
	if err := validSubject(cfg.SubjectPrefix, false); err != nil {
		return fmt.Errorf("subject prefix: %w", err)
	}
	return nil
}

// backoff is the jittered exponential delay before retry number attempt (1-based).
func backoff(minD, maxD time.Duration, attempt int) time.Duration {
	d := minD
	for i := 1; i < attempt && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	half := d / 2
	return half + rand.N(d-half+1)
}

// ConnectionDetails is the broker side of 002's trigger status; its JSON is 002's
// "connection_details" object.
type ConnectionDetails struct {
	// Connected reports whether the bridge is connected now.
	Connected bool
	// LastConnectedAt is when the connection was last established (zero before the first).
	LastConnectedAt time.Time
	// ReconnectAttempts counts the failed attempts of the current outage (0 while connected).
	ReconnectAttempts int
	// NextReconnectAt is when the next attempt is due (zero while connected).
	NextReconnectAt time.Time
}

// MarshalJSON writes 002's shape: {"event_broker": "connected"|"disconnected", "last_connected_at",
// "reconnect_attempts", "next_reconnect_at"}, the times in RFC 3339 with milliseconds and omitted
// while zero.
func (d ConnectionDetails) MarshalJSON() ([]byte, error) {
	ts := func(t time.Time) *string {
		if t.IsZero() {
			return nil
		}
		s := t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		return &s
	}
	broker := "disconnected"
	if d.Connected {
		broker = "connected"
	}
	return json.Marshal(struct {
		EventBroker       string  `json:"event_broker"`
		LastConnectedAt   *string `json:"last_connected_at,omitempty"`
		ReconnectAttempts int     `json:"reconnect_attempts"`
		NextReconnectAt   *string `json:"next_reconnect_at,omitempty"`
	}{broker, ts(d.LastConnectedAt), d.ReconnectAttempts, ts(d.NextReconnectAt)})
}

// Bridge is a connection to NATS with its JetStream context, the mirror publisher and the
// subscriptions. It is safe for concurrent use.
type Bridge struct {
	cfg Config
	log *slog.Logger
	nc  *nats.Conn
	js  jetstream.JetStream

	mu      sync.Mutex
	conn    ConnectionDetails
	changed chan struct{} // closed and replaced on every connection change
	closed  bool
	subs    map[string]*Subscription

	mirror mirror
}

// Open connects to cfg.URL (reconnecting for ever with jittered exponential backoff afterwards),
// makes sure the stream captures "<SubjectPrefix>.>" and starts the mirror publisher. The first
// connection must succeed: a wrong URL stops the start instead of mirroring into nothing.
func Open(ctx context.Context, cfg Config) (*Bridge, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Bridge{cfg: cfg, log: cfg.Logger.With("component", "natsbridge"), changed: make(chan struct{}),
		subs: map[string]*Subscription{}}
	opts := []nats.Option{
		nats.Name("lark"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(cfg.MinBackoff),
		nats.CustomReconnectDelay(b.reconnectDelay),
		nats.DisconnectErrHandler(b.onDisconnect),
		nats.ReconnectHandler(b.onReconnect),
		nats.ClosedHandler(b.onClosed),
		nats.IgnoreDiscoveredServers(),
	}
	if d, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(d)))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("natsbridge: connect %s: %w", cfg.URL, err)
	}
	b.nc = nc
	b.conn = ConnectionDetails{Connected: true, LastConnectedAt: cfg.Clock.Now()}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("natsbridge: jetstream: %w", err)
	}
	b.js = js
	if err := b.ensureStreamRetrying(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	b.mirror.start(b)
	b.log.Info("nats bridge connected", "url", nc.ConnectedUrlRedacted(), "stream", cfg.StreamName, "prefix", cfg.SubjectPrefix)
	return b, nil
}

// streamAttempts is how many times Open tries to set up the stream: a server that has just started,
// or is busy creating and deleting other streams, may answer 500 to a valid request once.
const streamAttempts = 3

// ensureStreamRetrying calls ensureStream up to streamAttempts times while ctx allows.
func (b *Bridge) ensureStreamRetrying(ctx context.Context) error {
	var err error
	for attempt := 1; attempt <= streamAttempts; attempt++ {
		if err = b.ensureStream(ctx); err == nil {
			return nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.Code >= 400 && apiErr.Code < 500 {
			return err // the request is wrong: asking again does not help
		}
		b.log.Warn("stream setup failed; retrying", "stream", b.cfg.StreamName, "err", err, "attempt", attempt)
		t := time.NewTimer(backoff(b.cfg.MinBackoff, b.cfg.MaxBackoff, attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		}
	}
	return err
}

// ensureStream creates the stream, or adds "<prefix>.>" to the subjects of an existing one.
func (b *Bridge) ensureStream(ctx context.Context) error {
	subject := b.cfg.SubjectPrefix + ".>"
	s, err := b.js.Stream(ctx, b.cfg.StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = b.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        b.cfg.StreamName,
			Description: "Lark events mirrored by the NATS bridge",
			Subjects:    []string{subject},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  b.cfg.DedupWindow,
			MaxAge:      b.cfg.MaxAge,
		})
		if err != nil {
			return fmt.Errorf("natsbridge: create stream %s: %w", b.cfg.StreamName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("natsbridge: stream %s: %w", b.cfg.StreamName, err)
	}
	sc := s.CachedInfo().Config
	for _, have := range sc.Subjects {
		if have == subject {
			return nil
		}
	}
	sc.Subjects = append(sc.Subjects, subject)
	if _, err := b.js.UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("natsbridge: add %s to stream %s: %w", subject, b.cfg.StreamName, err)
	}
	return nil
}

// Prefix returns the configured subject prefix.
func (b *Bridge) Prefix() string { return b.cfg.SubjectPrefix }

// StreamName returns the stream mirrored events are stored in.
func (b *Bridge) StreamName() string { return b.cfg.StreamName }

// Connection returns the connection's current details.
func (b *Bridge) Connection() ConnectionDetails {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conn
}

// connState returns whether the bridge is connected and a channel closed at the next change.
func (b *Bridge) connState() (connected bool, changed <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conn.Connected && !b.closed, b.changed
}

// setConn applies f to the connection details and wakes whoever waits for a change.
func (b *Bridge) setConn(f func(*ConnectionDetails)) {
	b.mu.Lock()
	f(&b.conn)
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// reconnectDelay is nats.go's CustomReconnectDelay: it records the attempt and its due time.
func (b *Bridge) reconnectDelay(attempts int) time.Duration {
	d := backoff(b.cfg.MinBackoff, b.cfg.MaxBackoff, attempts)
	now := b.cfg.Clock.Now()
	b.setConn(func(c *ConnectionDetails) {
		c.ReconnectAttempts = attempts
		c.NextReconnectAt = now.Add(d)
	})
	return d
}

func (b *Bridge) onDisconnect(_ *nats.Conn, err error) {
	b.setConn(func(c *ConnectionDetails) { c.Connected = false })
	b.log.Warn("nats bridge disconnected; reconnecting", "err", err)
}

func (b *Bridge) onReconnect(nc *nats.Conn) {
	now := b.cfg.Clock.Now()
	b.setConn(func(c *ConnectionDetails) {
		*c = ConnectionDetails{Connected: true, LastConnectedAt: now}
	})
	b.log.Info("nats bridge reconnected", "url", nc.ConnectedUrlRedacted())
}

func (b *Bridge) onClosed(*nats.Conn) {
	b.setConn(func(c *ConnectionDetails) { c.Connected = false; c.NextReconnectAt = time.Time{} })
}

// Close stops the subscriptions (their handlers finish), publishes what is queued for up to
// DrainTimeout (the rest is counted as dropped), then closes the connection. Close is idempotent.
func (b *Bridge) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	subs := make([]*Subscription, 0, len(b.subs))
	for _, s := range b.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	for _, s := range subs {
		s.signalStop() // all at once: each may wait for its pull
	}
	for _, s := range subs {
		s.Stop()
	}
	b.mirror.stop(b.cfg.DrainTimeout)
	b.nc.Close()
	return nil
}
