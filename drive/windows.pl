# The window helper: one X client that lists the window manager's windows
# and carries out an operation on one, speaking the X protocol itself over
# the display's unix socket. It runs on perl-base (Essential in Debian, so
# in every image) with builtins only, and one connection answers in a
# round trip per step what wmctrl and xdotool took a process per window
# for.
#
# Usage: perl -e SCRIPT -- SECONDS OP [WINDOW [ARGS...]], with DISPLAY
# :N (:0 without). The helper ends itself after SECONDS (SIGALRM): it runs
# without timeout(1) around it, one process fewer.
#   list                        every window
#   place WINDOW X Y W H POLLS  move the client area's corner to X,Y and/or
#                               resize it to WxH (-1 keeps a value)
#   focus WINDOW POLLS          activate it
#   close WINDOW POLLS          ask it to close
# list, place and focus print "active N" and a "window" line per window
# (place and focus: the one window, as it is afterwards); close prints
# "closed" or "open". A WINDOW that is not a managed window prints
# "no window" and exits 4. POLLS bounds the wait for the window manager,
# at 20 ms a poll.
#
# No module is loaded, not even strict and warnings: under TCG loading
# them took longer than everything the helper does over X.
my ($limit, $op, $wid, @args) = @ARGV;
alarm($limit) if $limit;
$op //= 'list';
my $display = ($ENV{DISPLAY} // ':0') =~ /^[^:]*:(\d+)/ ? $1 : 0;

socket(my $x, 1, 1, 0) or die "socket: $!\n";    # AF_UNIX, SOCK_STREAM
connect($x, pack('S Z108', 1, "/tmp/.X11-unix/X$display"))
  or die "cannot connect to the X display :$display: $!\n";

my ($out, $in, $seq, %got) = ('', '', 0);

sub rd {
	my $n = shift;
	while (length($in) < $n) {
		my $r = sysread($x, $in, 65536, length $in);
		die "the X server closed the connection\n" unless $r;
	}
	return substr($in, 0, $n, '');
}

sub flush {
	while (length $out) {
		my $w = syswrite($x, $out);
		die "write to the X server: $!\n" unless defined $w;
		substr($out, 0, $w, '');
	}
}

# req queues a request (its data padded to 4 bytes) and returns its
# sequence number; reply sends what is queued and waits for that
# request's reply, undef for an X error (a window that went meanwhile).
sub req {
	my ($opcode, $b1, $data) = @_;
	$data .= "\0" x (-length($data) % 4);
	$out .= pack('C C v', $opcode, $b1, 1 + length($data) / 4) . $data;
	return ++$seq & 0xffff;
}

sub reply {
	my $want = shift;
	flush();
	until (exists $got{$want}) {
		my $h = rd(32);
		my $type = ord $h;
		next if $type > 1;    # an event: none is selected, none is owed
		my $s = unpack('v', substr($h, 2, 2));
		if ($type == 1) {
			my $more = unpack('V', substr($h, 4, 4));
			$got{$s} = $h . ($more ? rd(4 * $more) : '');
		} else {
			$got{$s} = undef;
		}
	}
	return delete $got{$want};
}

# The connection set-up: no authorization (the guest's X takes local
# clients), the first screen's root window.
$out = pack('a1 x v v v v x2', 'l', 11, 0, 0, 0);
flush();
my $setup = rd(8);
my $more = unpack('v', substr($setup, 6, 2));
my $body = rd(4 * $more);
die "the X server refused the connection: " . substr($body, 0, unpack('C', substr($setup, 1, 1))) . "\n"
  unless ord($setup) == 1;
my ($vendor, $formats) = unpack('x16 v x2 x C', $body);
my $root = unpack('V', substr($body, 32 + $vendor + (-$vendor % 4) + 8 * $formats, 4));

my @names = qw(_NET_CLIENT_LIST _NET_ACTIVE_WINDOW _NET_WM_NAME _NET_WM_PID _NET_WM_DESKTOP
  _NET_FRAME_EXTENTS _NET_MOVERESIZE_WINDOW _NET_CLOSE_WINDOW);
my @seqs = map { req(16, 0, pack('v x2', length $_) . $_) } @names;    # InternAtom
my %atom;
for my $i (0 .. $#names) {
	my $r = reply($seqs[$i]);
	$atom{ $names[$i] } = $r ? unpack('V', substr($r, 8, 4)) : 0;
}
my ($WM_NAME, $WM_CLASS) = (39, 67);

# prop queues a GetProperty of any type and returns its sequence number;
# value reads its reply: the format and the raw value, or nothing.
sub prop { req(20, 0, pack('V V V V V', $_[0], $_[1], 0, 0, 65536)) }

sub value {
	my $r = reply(shift) // return;
	my ($format, $n) = (unpack('C', substr($r, 1, 1)), unpack('V', substr($r, 16, 4)));
	return if $format == 0;
	return ($format, substr($r, 32, $n * $format / 8));
}

sub cards { my ($f, $v) = value(shift); return defined $v && $f == 32 ? unpack('V*', $v) : () }

sub clients { cards(prop($root, $atom{_NET_CLIENT_LIST})) }
sub active { (cards(prop($root, $atom{_NET_ACTIVE_WINDOW})))[0] // 0 }

# windows reads the windows' properties and geometry, pipelined: the
# client area's size (GetGeometry) and its corner on the root window
# (TranslateCoordinates of its origin), and the frame's extents.
sub windows {
	my @q = map {
		my $w = $_;
		[$w, prop($w, $atom{_NET_WM_NAME}), prop($w, $WM_NAME), prop($w, $WM_CLASS), prop($w, $atom{_NET_WM_PID}),
			prop($w, $atom{_NET_WM_DESKTOP}), prop($w, $atom{_NET_FRAME_EXTENTS}), req(14, 0, pack('V', $w)),
			req(40, 0, pack('V V v v', $w, $root, 0, 0))]
	} @_;
	my @wins;
	for (@q) {
		my ($w, @s) = @$_;
		my $title = (value($s[0]))[1];
		my $name = (value($s[1]))[1];
		if (!defined $title && defined $name) {
			$title = $name;
			utf8::encode($title);    # STRING is Latin-1
		}
		$title //= '';
		$title =~ s/[\r\n]+/ /g;
		my ($instance, $class) = split /\0/, ((value($s[2]))[1] // ''), 3;
		my ($pid) = cards($s[3]);
		my ($desk) = cards($s[4]);
		my @ext = cards($s[5]);
		my $geo = reply($s[6]);
		my $pos = reply($s[7]);
		next unless $geo && $pos;
		my ($width, $height) = unpack('v v', substr($geo, 16, 4));
		my ($px, $py) = unpack('s< s<', substr($pos, 12, 4));
		@ext = (0, 0, 0, 0) unless @ext == 4;
		push @wins, {
			id => $w, desk => defined $desk && $desk != 0xffffffff ? $desk : -1, pid => $pid // 0,
			x => $px, y => $py, w => $width, h => $height, ext => [@ext],
			instance => $instance // '', class => $class // '', title => $title,
		};
	}
	return @wins;
}

sub line {
	my $w = shift;
	return join("\t", 'window', sprintf('0x%08x', $w->{id}), $w->{desk}, $w->{pid}, $w->{x}, $w->{y}, $w->{w}, $w->{h},
		@{ $w->{ext} }, $w->{instance}, $w->{class}, $w->{title}) . "\n";
}

sub answer {
	my $active = shift;
	print "active $active\n", map { line($_) } @_;
	exit 0;
}

if ($op eq 'list') {    # both root properties in one round trip
	my ($list, $active) = (prop($root, $atom{_NET_CLIENT_LIST}), prop($root, $atom{_NET_ACTIVE_WINDOW}));
	my @ids = cards($list);
	answer((cards($active))[0] // 0, windows(@ids));
}

die "usage: $op WINDOW ...\n" unless defined $wid && $wid =~ /^(0x[0-9a-f]+|\d+)$/i;
$wid = oct($wid) if $wid =~ /^0x/i;
unless (grep { $_ == $wid } clients()) {
	print "no window\n";
	exit 4;
}
my $polls = pop @args;
die "usage: $op WINDOW ... POLLS\n" unless defined $polls && $polls =~ /^\d+$/;

# message sends the window manager a client message about the window
# (SendEvent to the root, as EWMH asks), from a pager (source 2).
sub message {
	my ($type, @l) = @_;
	my $event = pack('C C v V V V5', 33, 32, 0, $wid, $type, (@l, 0, 0, 0, 0, 0)[0 .. 4]);
	req(25, 0, pack('V V', $root, (1 << 19) | (1 << 20)) . $event);
}

# waitfor polls until cond holds (at least once, at most $polls times), and
# says whether it did.
sub waitfor {
	my $cond = shift;
	for (my $i = 0;; $i++) {
		return 1 if $cond->();
		return 0 if $i >= $polls;
		select(undef, undef, undef, 0.02);
	}
}

sub one { my ($w) = windows($wid); return $w }

if ($op eq 'focus') {
	message($atom{_NET_ACTIVE_WINDOW}, 2, 0, 0);
	waitfor(sub { active() == $wid }) or die sprintf("the window manager did not focus 0x%08x\n", $wid);
	my $w = one() // do { print "no window\n"; exit 4 };
	answer($wid, $w);
}

if ($op eq 'close') {
	message($atom{_NET_CLOSE_WINDOW}, 0, 2);
	print waitfor(sub { !grep { $_ == $wid } clients() }) ? "closed\n" : "open\n";
	exit 0;
}

die "unknown operation $op\n" unless $op eq 'place' && @args == 4;
my ($tx, $ty, $tw, $th) = @args;
my $before = one() // do { print "no window\n"; exit 4 };
my $at = sub { my $w = shift; ($tx < 0 || ($w->{x} == $tx && $w->{y} == $ty)) && ($tw < 0 || ($w->{w} == $tw && $w->{h} == $th)) };
answer(active(), $before) if $at->($before);

# _NET_MOVERESIZE_WINDOW with StaticGravity (10): X,Y is where the client
# area goes. A window manager that places the frame's corner there
# instead is asked again, off by what it did.
sub place {
	my ($x, $y) = @_;
	my $flags = 10 | (2 << 12);
	$flags |= (1 << 8) | (1 << 9) if $tx >= 0;
	$flags |= (1 << 10) | (1 << 11) if $tw >= 0;
	message($atom{_NET_MOVERESIZE_WINDOW}, $flags, map { $_ & 0xffffffff } ($tx < 0 ? (0, 0) : ($x, $y)), ($tw < 0 ? (0, 0) : ($tw, $th)));
}
my $same = sub { my ($p, $q) = @_; $p->{x} == $q->{x} && $p->{y} == $q->{y} && $p->{w} == $q->{w} && $p->{h} == $q->{h} };
my $now = $before;
my $moved = sub { my $prev = shift; sub { $now = one(); !$now || !$same->($now, $prev) } };
place($tx, $ty);
waitfor($moved->($before));
$now // do { print "no window\n"; exit 4 };
if ($tx >= 0 && ($now->{x} != $tx || $now->{y} != $ty)) {
	my $prev = $now;
	place(2 * $tx - $now->{x}, 2 * $ty - $now->{y});
	waitfor($moved->($prev));
	$now // do { print "no window\n"; exit 4 };
}
answer(active(), $now);
