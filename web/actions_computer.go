package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
)

// The computer-use adapters take bodies exactly as the models emit them
// and answer what the models expect. The agent declares the coordinate
// space it told the model about (Anthropic's display_width_px and
// display_height_px, OpenAI's display_width and display_height) as query
// parameters or X-Display-Width / X-Display-Height headers; the screenshot
// is scaled to it and coordinates are mapped back from it. Without one,
// the space is the native screen.

func (s *Server) postAnthropic(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	spec, ok := adapterSpec(c, "display_width_px", "display_height_px")
	if !ok {
		return
	}
	if isMixedTurn(body) {
		s.mixedTurn(c, spec, body)
		return
	}
	if input.IsAnthropicTurn(body) {
		s.anthropicTurn(c, spec, body)
		return
	}
	toolUseID := firstOf(c.Query("tool_use_id"), c.GetHeader("X-Tool-Use-Id"))
	call, blockID, err := decodeAnthropicBody(body)
	if blockID != "" {
		toolUseID = blockID
	}
	failed := func(call input.AnthropicCall, res input.BatchResult, err error) {
		status, eb := errorOf(err)
		c.AbortWithStatusJSON(status, api.AnthropicFailure{Error: eb, ToolResult: input.NewAnthropicToolResult(toolUseID, call, res, err, nil)})
	}
	if err != nil {
		failed(call, input.BatchResult{}, err)
		return
	}
	spec.Batch, spec.Screenshot = call.Batch, call.WantsScreenshot()
	spec.NoUpscale = !isDaemon(c)
	out, err := s.cfg.Drive.Run(c.Request.Context(), c.Param("id"), spec)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		failed(call, out.Result, err)
		return
	}
	res := input.NewAnthropicToolResult(toolUseID, call, out.Result, nil, pictureImage(out))
	res.Note(out.Notes())
	c.JSON(http.StatusOK, res)
}

// anthropicTurn runs a whole assistant turn of the computer toolset: its
// computer calls in order, each through the drive service like a single
// call, stopping at the first failure (the rest answer is_error unrun).
// The answer is 200 with the next user message whatever failed inside the
// turn, since the model is to read it; X-Warmdesk-Failed-Call gives the
// index of the call that failed, and X-Warmdesk-Other-Tools names tool_use
// blocks of other tools, which the caller answers itself.
func (s *Server) anthropicTurn(c *gin.Context, spec drive.Request, body []byte) {
	uses, others, err := input.DecodeAnthropicTurn(body)
	if err != nil {
		failWith(c, err)
		return
	}
	disabled, err := input.DecodeAnthropicToolset(body)
	if err != nil {
		failWith(c, err)
		return
	}
	id := c.Param("id")
	// A desktop that is not there fails the request, not each call.
	if _, err := s.cfg.Manager.Get(id); err != nil {
		fail(c, err)
		return
	}
	spec.NoUpscale = !isDaemon(c)
	results, failed := s.runComputerCalls(c.Request.Context(), id, spec, uses, disabled)
	if len(others) > 0 {
		c.Header("X-Warmdesk-Other-Tools", strings.Join(others, ","))
	}
	if failed >= 0 {
		c.Header("X-Warmdesk-Failed-Call", strconv.Itoa(failed))
	}
	c.JSON(http.StatusOK, api.AnthropicTurnResult{Role: "user", Content: results})
}

// runComputerCalls runs a turn's computer calls in order through the drive
// service, each like a single call, stopping at the first failure.
func (s *Server) runComputerCalls(ctx context.Context, id string, spec drive.Request, uses []input.AnthropicToolUse, disabled map[string]bool) ([]input.AnthropicToolResult, int) {
	return input.RunAnthropicTurn(uses, disabled, func(call input.AnthropicCall) (input.BatchResult, *input.Image, []string, error) {
		req := spec
		req.Batch, req.Screenshot = call.Batch, call.WantsScreenshot()
		out, err := s.cfg.Drive.Run(ctx, id, req)
		if err == nil {
			err = out.Err
		}
		return out.Result, pictureImage(out), out.Notes(), err
	})
}

// postGemini runs a Gemini computer-use turn: one function call, an array
// of them, or the model's Content. The grid maps onto the declared display
// (display_width, display_height: the screenshots' size) or the native
// screen. The answer is 200 with the user Content of functionResponse
// parts, each with its call's id, its screenshot and, on a desktop with a
// browser, its page's url, whatever failed inside the turn;
// X-Warmdesk-Failed-Call gives the index of the call that failed.
// require_confirmation calls run only with acknowledge_safety=true; the
// browser's own functions only on a desktop with a browser.
func (s *Server) postGemini(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	spec, ok := adapterSpec(c, "display_width", "display_height")
	if !ok {
		return
	}
	ack := false
	if v := c.Query("acknowledge_safety"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			badRequest(c, "acknowledge_safety", "use true or false")
			return
		}
		ack = b
	}
	calls, err := input.DecodeGeminiCalls(body)
	if err != nil {
		failWith(c, err)
		return
	}
	id := c.Param("id")
	profile, err := s.cfg.Drive.Profile(id)
	if err != nil {
		fail(c, err)
		return
	}
	env := input.GeminiEnv{Space: spec.Display, SearchURL: c.Query("search_url"), Browser: profile.Browser}
	if env.Space == (image.Point{}) {
		env.Space = profile.Screen
	}
	spec.NoUpscale = !isDaemon(c)
	parts, failed := input.RunGeminiTurn(calls, env, ack, func(call input.GeminiCall) (input.GeminiState, error) {
		if call.Navigate != "" {
			if err := s.openPage(c.Request.Context(), id, call.Navigate); err != nil {
				return input.GeminiState{}, err
			}
		}
		req := spec
		req.Batch, req.Screenshot = call.Batch, true
		out, err := s.cfg.Drive.Run(c.Request.Context(), id, req)
		if err == nil {
			err = out.Err
		}
		st := input.GeminiState{Screenshot: pictureImage(out), Notes: out.Notes()}
		if env.Browser {
			st.URL = s.pageURL(c.Request.Context(), id)
		}
		return st, err
	})
	if failed >= 0 {
		c.Header("X-Warmdesk-Failed-Call", strconv.Itoa(failed))
	}
	c.JSON(http.StatusOK, api.GeminiTurnResult{Role: "user", Parts: parts})
}

// settleHeaders tell a client whose schema has no place for them how the
// trailing picture was taken: X-Warmdesk-Settled (true when it shows the
// input's outcome on a quiet screen), X-Warmdesk-Reaction-Ms, and
// X-Warmdesk-Note with what the batch could not confirm.
func settleHeaders(c *gin.Context, out drive.Outcome) {
	if pic := out.Picture; pic != nil && pic.Settle != nil {
		c.Header("X-Warmdesk-Settled", strconv.FormatBool(pic.Settled()))
		if pic.Reacted != nil {
			c.Header("X-Warmdesk-Reaction-Ms", strconv.FormatInt(pic.ReactionWait.Milliseconds(), 10))
		}
	}
	if notes := out.Notes(); len(notes) > 0 {
		c.Header("X-Warmdesk-Note", strings.Join(notes, "; "))
	}
}

// pictureImage is a batch's trailing screenshot as a tool result's image,
// or nil.
func pictureImage(out drive.Outcome) *input.Image {
	if out.Picture == nil {
		return nil
	}
	return &input.Image{MediaType: out.Picture.Shot.ContentType(), Data: out.Picture.Shot.Data}
}

// decodeAnthropicBody reads the input of a computer tool_use block, or the
// whole block ({"type": "tool_use", "id", "name", "input"}), whose id then
// answers as tool_use_id and whose name picks a computer_toolset member.
func decodeAnthropicBody(body []byte) (input.AnthropicCall, string, error) {
	var block struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	// The computer tool's input has no "type" field: a body with
	// "type":"tool_use" is a whole block.
	if json.Unmarshal(body, &block) == nil && block.Type == "tool_use" {
		if len(block.Input) == 0 {
			return input.AnthropicCall{}, block.ID, &input.ValidationError{Field: "input", Reason: "required in a tool_use block"}
		}
		if block.Name != "" && block.Name != "computer" {
			call, err := input.DecodeAnthropicMember(block.Name, block.Input)
			return call, block.ID, err
		}
		call, err := input.DecodeAnthropic(block.Input)
		return call, block.ID, err
	}
	call, err := input.DecodeAnthropic(body)
	return call, "", err
}

func (s *Server) postOpenAI(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	spec, ok := adapterSpec(c, "display_width", "display_height")
	if !ok {
		return
	}
	ack, ok := safetyAcknowledger(c)
	if !ok {
		return
	}
	detail := c.Query("detail")
	if detail != "" && !slices.Contains(input.OpenAIDetails, detail) {
		badRequest(c, "detail", fmt.Sprintf("detail %q: use one of %s, or leave it out (the output then has no detail, as OpenAI's schema has none there)", detail, strings.Join(input.OpenAIDetails, ", ")))
		return
	}
	call, err := input.DecodeOpenAI(body, input.OpenAIOptions{})
	if err != nil {
		// Decoding names the item's own fields already.
		failWith(c, err)
		return
	}
	// Nothing runs until a person acknowledged every pending check.
	if err := call.Unconfirmed(ack); err != nil {
		failWith(c, err)
		return
	}
	failed := func(err error) {
		status, eb := errorOf(err)
		// Validation and the runner name canonical fields ("actions[0].dy"):
		// the model should read its own ("actions[0].scroll_y").
		eb.Message = input.OpenAIErrorText(call, err)
		var ve *input.ValidationError
		if errors.As(err, &ve) {
			if f, _, ok := strings.Cut(eb.Message, ": "); ok && !strings.Contains(f, " ") {
				eb.Field = f
			}
		}
		c.AbortWithStatusJSON(status, api.Error{Error: eb})
	}
	// A computer_call_output always carries the screenshot after the call.
	spec.Batch, spec.Screenshot = call.Batch, true
	spec.NoUpscale = !isDaemon(c)
	out, err := s.cfg.Drive.Run(c.Request.Context(), c.Param("id"), spec)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		failed(err)
		return
	}
	img := input.Image{MediaType: out.Picture.Shot.ContentType(), Data: out.Picture.Shot.Data}
	settleHeaders(c, out)
	c.JSON(http.StatusOK, input.NewOpenAIOutput(call, img, ack, detail))
}

// adapterSpec reads what an adapter call takes besides its body: the
// declared display, and optionally format, quality, settle_ms, timeout_ms,
// reaction_ms.
func adapterSpec(c *gin.Context, wName, hName string) (drive.Request, bool) {
	spec := drive.NewRequest(nil)
	spec.Cursor = true
	// Either adapter's names are accepted, so an agent that mixes them up
	// still gets what it declared.
	w, ok := dimParam(c, []string{wName, "display_width_px", "display_width"}, "X-Display-Width")
	if !ok {
		return spec, false
	}
	h, ok := dimParam(c, []string{hName, "display_height_px", "display_height"}, "X-Display-Height")
	if !ok {
		return spec, false
	}
	var err error
	if spec.Display, err = displaySize(w, h, wName, hName); err != nil {
		failWith(c, err)
		return spec, false
	}
	if spec.Format, err = imageFormat(c.Query("format"), "format"); err != nil {
		failWith(c, err)
		return spec, false
	}
	if v := c.Query("quality"); v != "" {
		q, err := strconv.Atoi(v)
		if err != nil || q < 1 || q > 100 || spec.Format != screenshot.JPEG {
			badRequest(c, "quality", fmt.Sprintf("quality %q: a JPEG quality is 1 to 100, with format=jpeg", v))
			return spec, false
		}
		spec.Quality = q
	}
	for _, p := range []struct {
		to    *time.Duration
		bound drive.Bound
	}{{&spec.Settle, drive.SettleBound}, {&spec.SettleTimeout, drive.SettleTimeoutBound}, {&spec.Reaction, drive.ReactionBound}} {
		if *p.to, err = boundParam(c.Query(p.bound.Field), *p.to, p.bound); err != nil {
			fail(c, err)
			return spec, false
		}
	}
	return spec, true
}

// dimParam reads one side of the declared display from the first query
// parameter given, or from the header (also accepted with a -Px suffix).
func dimParam(c *gin.Context, queries []string, header string) (int, bool) {
	name, v := "", ""
	for _, q := range queries {
		if v = c.Query(q); v != "" {
			name = q
			break
		}
	}
	if v == "" {
		for _, h := range []string{header, header + "-Px"} {
			if v = c.GetHeader(h); v != "" {
				name = h
				break
			}
		}
	}
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		badRequest(c, name, fmt.Sprintf("%s %q: a whole number of pixels", name, v))
		return 0, false
	}
	return n, true
}

// safetyAcknowledger reads acknowledge_safety_checks: "all", or a comma
// list of check ids; absent acknowledges none. A call runs only once a
// person (or the agent's own policy) acknowledged each of its checks.
func safetyAcknowledger(c *gin.Context) (func(input.OpenAISafetyCheck) bool, bool) {
	v := strings.TrimSpace(c.Query("acknowledge_safety_checks"))
	switch v {
	case "", "none":
		return nil, true
	case "all":
		return func(input.OpenAISafetyCheck) bool { return true }, true
	}
	ids := strings.Split(v, ",")
	for i := range ids {
		ids[i] = strings.TrimSpace(ids[i])
		if ids[i] == "" {
			badRequest(c, "acknowledge_safety_checks", "use all, none, or a comma-separated list of safety check ids")
			return nil, false
		}
	}
	return func(sc input.OpenAISafetyCheck) bool { return slices.Contains(ids, sc.ID) }, true
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
