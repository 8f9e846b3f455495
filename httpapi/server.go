// Package httpapi serves the merchant API (/v1, signed form requests), the
// operator API (/ops/v1, bearer token, JSON), the hosted payment page and
// the health endpoints, all in the response envelope of the contract.
package httpapi

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/iqdgateway/gateway/callbacks"
	"github.com/iqdgateway/gateway/docs"
	"github.com/iqdgateway/gateway/hostedpage"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/ledger"
	"github.com/iqdgateway/gateway/records"
)

// Config wires the server to the ledger and read models.
type Config struct {
	Ledger *ledger.Ledger
	Reader *records.Reader
	// AdminToken is the bootstrap operator token.
	AdminToken string
	// TrustedProxies are the peers whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix
	// AppVersion is the build label in every response.
	AppVersion string
	// StoreReady reports whether the event store answers (for /readyz).
	StoreReady func(ctx context.Context) error
	// ReadModels reports the fault that stopped the read models (for
	// /readyz), nil while they follow the stream; nil: not checked.
	ReadModels func() error
	// RequestTimeout bounds a request's waits on the ledger and the store.
	RequestTimeout time.Duration
	// HostedRateLimit is the hosted page's requests per second per client
	// address (an IPv6 /64), burst twice that; 0 means
	// DefaultHostedRateLimit, negative means no limit.
	HostedRateLimit int64
	// Now is the rate limiters' clock (time.Now when nil).
	Now func() time.Time
	// Callbacks serves /ops/v1/callbacks when set (the dispatcher may run
	// in this process or another; its state is in JetStream either way).
	Callbacks Callbacks
	// Events is the event store, which GET /v1/callbacks/stream reads
	// (nil: the stream answers 503).
	Events callbacks.Store
	// StreamsPerSite bounds the callback streams one site has open in
	// this process at once: 0 means DefaultStreamsPerSite, negative means
	// no limit.
	StreamsPerSite int
	// Streams bounds the callback streams this process serves at once:
	// 0 means DefaultStreams, negative means no limit.
	Streams int
	// Logger receives the server's logs; every line about a request
	// carries its requestId.
	Logger *slog.Logger
	// Metrics measures every request (nil: nothing is measured).
	Metrics Metrics
	// DocsURL is the base of the documentation links in error answers
	// (docLink): where the pages of docs/ are served. Empty: this
	// gateway's own /docs under the Reader's public URL.
	DocsURL string
	// MetricsHandler, when set, serves GET /metrics without operator
	// authentication: keep it off the internet (docs/metrics.md "Keeping
	// /metrics internal").
	MetricsHandler http.Handler
}

// Server is the HTTP surface of the gateway.
type Server struct {
	cfg     Config
	log     *slog.Logger
	limiter *limiter
	streams streamSlots
	router  chi.Router
	docs    docs.Pages
	// payPage renders the hosted payment page and its error pages.
	payPage *hostedpage.Page
	// adminHash is the SHA-256 of the bootstrap admin token.
	adminHash [32]byte
	// merchantPaths has the merchant endpoints, to tell an unknown path
	// before any credentials are checked.
	merchantPaths *chi.Mux
	// stopping is closed by StopStreams: the process is stopping.
	stopping chan struct{}
	stopOnce sync.Once
}

// MaxBody is the largest merchant or operator request body (docs/merchant-api.md "Order of checks").
const MaxBody = 16 << 10

// DefaultHostedRateLimit is the hosted page's default rate per client
// address. A customer loads the page, reloads it now and then and it
// refreshes itself every 20 s; many customers may share one carrier-grade
// NAT address, hence well above one person's need.
const DefaultHostedRateLimit = 20

// Each open callback stream holds a connection and a goroutine for as long
// as its client stays, and reads the event store whenever its site stores
// something: a site needs one or two (a follower and a spare), and a
// process must keep room for its requests (docs/callbacks.md "Following
// callbacks without a public URL").
const (
	DefaultStreamsPerSite = 4
	DefaultStreams        = 256
)

// New builds the server's routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.AppVersion == "" {
		cfg.AppVersion = "dev"
	}
	if cfg.HostedRateLimit == 0 {
		cfg.HostedRateLimit = DefaultHostedRateLimit
	}
	if cfg.StreamsPerSite == 0 {
		cfg.StreamsPerSite = DefaultStreamsPerSite
	}
	if cfg.Streams == 0 {
		cfg.Streams = DefaultStreams
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	if cfg.DocsURL == "" && cfg.Reader != nil {
		cfg.DocsURL = cfg.Reader.PublicURL() + "/docs"
	}
	cfg.DocsURL = strings.TrimRight(cfg.DocsURL, "/")
	page, err := hostedpage.New()
	if err != nil {
		// Its files are embedded: only a broken build gets here, and
		// hostedpage's tests would have failed on it.
		panic(err)
	}
	s := &Server{cfg: cfg, payPage: page, log: slog.New(requestLog{cfg.Logger.Handler()}), limiter: newLimiter(cfg.Now),
		adminHash: sha256.Sum256([]byte(cfg.AdminToken)), streams: streamSlots{bySite: map[ids.SiteID]int{}},
		stopping: make(chan struct{})}
	s.merchantPaths = chi.NewRouter()
	s.merchantEndpoints(s.merchantPaths)
	r := chi.NewRouter()
	// HEAD is served wherever GET is (RFC 9110 section 9.3.2), by the GET
	// handler: net/http sends no body for it. The header limit comes
	// before anything reads the request, after only what its refusal
	// carries (a requestId) and what counts it.
	r.Use(withRequestID, s.observe, s.limitHeaders, s.recoverer, s.deadline, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		info(r).unmatched = true
		if hostedPagePath(r.URL.Path) {
			// An end user's browser on a payment link gone wrong (a
			// trailing slash): the hosted page's own "not found".
			s.hostedError(w, r, http.StatusNotFound)
			return
		}
		s.writeErr(w, r, &apiError{status: 404, code: "not_found", message: "no such endpoint"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		info(r).unmatched = true
		s.notAllowed(w, r)
	})
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		s.writeData(w, r, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	if cfg.MetricsHandler != nil {
		r.Method(http.MethodGet, "/metrics", cfg.MetricsHandler)
	}
	r.Get("/openapi.json", serveOpenAPI("merchant.json"))
	r.Route("/v1", s.merchantRoutes)
	r.Get("/ops/openapi.json", serveOpenAPI("ops.json"))
	r.Route("/ops/v1", s.opsRoutes)
	r.Get("/pay/{txId}", s.hostedPage)
	r.Get("/pay/{txId}/status", s.hostedStatus)
	r.Route("/console", s.consoleRoutes)
	r.Get("/docs", s.docsPage)
	r.Get("/docs/{page}", s.docsPage)
	s.router = r
	return s
}

// notAllowed answers 405 with the methods r's path takes.
func (s *Server) notAllowed(w http.ResponseWriter, r *http.Request) {
	allowed := s.allowed(r)
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	s.writeErr(w, r, &apiError{status: 405, code: "method_not_allowed",
		message: r.Method + " is not allowed here; the methods are " + strings.Join(allowed, ", ")})
}

// creationPath reports whether path is a merchant creation path, which
// takes POST only. The router would also match a GET of one as a lookup of
// the transaction of that name, which no transaction id can be: such a
// GET is a method the path does not take.
func creationPath(path string) bool {
	return path == "/v1/transactions/deposit" || path == "/v1/transactions/withdraw"
}

// allowed lists the methods r's path takes, for the Allow header of a 405
// (RFC 9110 section 15.5.6): HEAD with GET.
func (s *Server) allowed(r *http.Request) []string {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	if creationPath(path) {
		return []string{http.MethodPost}
	}
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if s.router.Match(chi.NewRouteContext(), m, path) {
			out = append(out, m)
			if m == http.MethodGet {
				out = append(out, http.MethodHead)
			}
		}
	}
	return out
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Ledger.Ready() {
		s.writeErr(w, r, &apiError{status: 503, code: "unavailable", message: "the ledger is still catching up with the event store", routine: true})
		return
	}
	if s.cfg.ReadModels != nil {
		if err := s.cfg.ReadModels(); err != nil {
			s.writeErr(w, r, &apiError{status: 503, code: "unavailable", message: "the read models stopped (the log names the model and message)", cause: err})
			return
		}
	}
	if s.cfg.StoreReady != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.StoreReady(ctx); err != nil {
			s.writeErr(w, r, &apiError{status: 503, code: "unavailable", message: "the event store cannot be reached", cause: err})
			return
		}
	}
	s.writeData(w, r, map[string]any{"status": "ready", "sequence": s.cfg.Ledger.Followed()})
}

// deadline bounds every request's waits on the ledger and the store, reads
// included: a store that does not answer gets a 503, not a hung client.
func (s *Server) deadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == callbackStreamPath {
			// A stream lasts as long as its client; it bounds its own waits.
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// recoverer turns a panic into a 500 in the envelope; the ledger is never
// half-written by one because appends are single messages.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "panic in handler", "path", r.URL.Path, "panic", v)
				s.writeErr(w, r, &apiError{status: 500, code: "internal", message: "internal error; quote the requestId"})
			}
		}()
		next.ServeHTTP(w, r)
	})
}
