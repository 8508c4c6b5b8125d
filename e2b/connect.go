package e2b

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The Connect protocol (connectrpc.com), the subset envd's clients speak:
// unary calls as a JSON body in and out, server streams as enveloped JSON
// messages ending in an end-of-stream message that carries the error, if
// any. Codecs other than JSON and compression are refused.

// Connect error codes, as they go on the wire.
const (
	CodeCanceled           = "canceled"
	CodeUnknown            = "unknown"
	CodeInvalidArgument    = "invalid_argument"
	CodeDeadlineExceeded   = "deadline_exceeded"
	CodeNotFound           = "not_found"
	CodeAlreadyExists      = "already_exists"
	CodePermissionDenied   = "permission_denied"
	CodeResourceExhausted  = "resource_exhausted"
	CodeFailedPrecondition = "failed_precondition"
	CodeUnimplemented      = "unimplemented"
	CodeInternal           = "internal"
	CodeUnavailable        = "unavailable"
	CodeUnauthenticated    = "unauthenticated"
)

// httpStatus is the status a unary error goes with (the protocol's table).
var httpStatus = map[string]int{
	CodeCanceled:           499,
	CodeUnknown:            http.StatusInternalServerError,
	CodeInvalidArgument:    http.StatusBadRequest,
	CodeDeadlineExceeded:   http.StatusGatewayTimeout,
	CodeNotFound:           http.StatusNotFound,
	CodeAlreadyExists:      http.StatusConflict,
	CodePermissionDenied:   http.StatusForbidden,
	CodeResourceExhausted:  http.StatusTooManyRequests,
	CodeFailedPrecondition: http.StatusBadRequest,
	CodeUnimplemented:      http.StatusNotImplemented,
	CodeInternal:           http.StatusInternalServerError,
	CodeUnavailable:        http.StatusServiceUnavailable,
	CodeUnauthenticated:    http.StatusUnauthorized,
}

// RPCError is a Connect error: a code and a message for people.
type RPCError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

func (e *RPCError) Error() string { return e.Code + ": " + e.Message }

func rpcErrorf(code, format string, args ...any) *RPCError {
	return &RPCError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// asRPC turns any error into a Connect error; one that is not already
// is internal.
func asRPC(err error) *RPCError {
	var re *RPCError
	if errors.As(err, &re) {
		return re
	}
	return &RPCError{Code: CodeInternal, Message: err.Error()}
}

// Envelope flags of streamed messages.
const (
	flagCompressed = 0x01
	flagEndStream  = 0x02
)

// maxMessage bounds a request message: envd's requests are small (file
// contents go over plain HTTP, not RPC).
const maxMessage = 4 << 20

// readEnvelope reads one enveloped message.
func readEnvelope(r io.Reader) (flags byte, msg []byte, err error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxMessage {
		return 0, nil, rpcErrorf(CodeResourceExhausted, "message of %d bytes: at most %d", n, maxMessage)
	}
	msg = make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return 0, nil, fmt.Errorf("message cut short: %w", io.ErrUnexpectedEOF)
	}
	if head[0]&flagCompressed != 0 {
		return 0, nil, rpcErrorf(CodeInternal, "compressed message, but no compression was agreed")
	}
	return head[0], msg, nil
}

// appendEnvelope frames msg.
func appendEnvelope(dst []byte, flags byte, msg []byte) []byte {
	dst = append(dst, flags, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(dst[len(dst)-4:], uint32(len(msg)))
	return append(dst, msg...)
}

// endStream is the last message of a server stream.
type endStream struct {
	Error *RPCError `json:"error,omitempty"`
}

// timeoutOf reads Connect-Timeout-Ms; zero means none.
func timeoutOf(r *http.Request) (time.Duration, error) {
	v := r.Header.Get("Connect-Timeout-Ms")
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 || len(v) > 10 {
		return 0, rpcErrorf(CodeInvalidArgument, "Connect-Timeout-Ms %q: a positive number of milliseconds, at most 10 digits", v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// writeUnaryError answers a unary call with err.
func writeUnaryError(w http.ResponseWriter, err error) {
	re := asRPC(err)
	status, ok := httpStatus[re.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(re)
}

// writeUnary answers a unary call with msg.
func writeUnary(w http.ResponseWriter, msg any) {
	body, err := json.Marshal(msg)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// stream writes a server stream's messages; safe for concurrent Send.
type stream struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	ended   bool
}

func newStream(w http.ResponseWriter) *stream {
	return &stream{w: w, rc: http.NewResponseController(w)}
}

func (s *stream) start() {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "application/connect+json")
		s.w.WriteHeader(http.StatusOK)
	}
}

// Send writes one message and flushes it to the client.
func (s *stream) Send(msg any) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errors.New("stream already ended")
	}
	s.start()
	if _, err := s.w.Write(appendEnvelope(nil, 0, body)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// End writes the end-of-stream message, with err when the call failed.
func (s *stream) End(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	s.start()
	var end endStream
	if err != nil {
		end.Error = asRPC(err)
	}
	body, _ := json.Marshal(end)
	s.w.Write(appendEnvelope(nil, flagEndStream, body))
	s.rc.Flush()
}
