# frozen_string_literal: true

module ZkLock
  # One ZooKeeper session; any number of threads may use it at once.
  #
  #   client = ZkLock::Client.new("127.0.0.1:2181")
  #   client.mutex("/locks/report").synchronize { ... }
  #   client.close
  #
  # ZkLock::Client.open(hosts, **options) { |client| ... } closes it at the end of the block.
  class Client
    PROTOCOLS = { curator: 0, kazoo: 1 }.freeze
    ACLS = { open: 0, creator_all: 1, creator_all_read_all: 2 }.freeze
    SESSION_STATES = %i[connected suspended expired closed].freeze

    # Connects and yields the client, closing it when the block ends (its locks are released).
    # Without a block, the same as new.
    def self.open(hosts, **options)
      client = new(hosts, **options)
      return client unless block_given?

      begin
        yield client
      ensure
        client.close
      end
    end

    # Connects to +hosts+ ("host:port[,host:port...][/chroot]"; a host may be written tcp://
    # or tcp+tls://), waiting up to +connect_timeout+ seconds (default: the session timeout;
    # then ConnectionLoss, saying why).
    #
    # session_timeout:: seconds, 0.1 to 3600 (the servers may grant less); default 10
    # holder_id:: stored in this client's lock nodes (default "HOSTNAME:PID")
    # protocol:: :curator (default) or :kazoo: how lock nodes are named, to share a lock path
    #            with Apache Curator's or kazoo's locks
    # acl:: :open (default), :creator_all or :creator_all_read_all: the ACL of the nodes this
    #       client creates (the creator ones need an identity: auth:, sasl: or a client
    #       certificate)
    # server_tick:: the servers' tickTime in seconds (default: asked of the servers)
    # auth:: [[scheme, credential], ...] added at every session, e.g. [["digest", "u:pw"]]
    #
    # TLS (to every host not written tcp://):
    # tls:: true for TLS with the system's CAs; any setting below turns it on too
    # ca_file:: a PEM file of the CAs that sign the servers' certificates
    # cert_file:: the client's certificate (PEM, with its chain), for servers that require one
    # key_file:: its private key (PEM; default: read from cert_file)
    # key_password:: the password of an encrypted PKCS#8 key
    # verify_hostname:: false accepts any certificate of a trusted CA for the servers, whatever
    #                   name it bears (DANGEROUS: any holder of one can pose as them); default true
    #
    # SASL:
    # sasl:: { username:, password: } (DIGEST-MD5), or { mechanism: :gssapi, principal:,
    #        service:, host: } (Kerberos with the process's credentials, every key optional;
    #        needs a library built with the sasl-gssapi feature)
    #
    # A server that refuses the credentials, or a TLS handshake that fails over a certificate,
    # raises AuthFailed saying what to fix; a bad file is InvalidArgument naming it.
    def initialize(hosts, session_timeout: 10, connect_timeout: nil, holder_id: nil,
                   protocol: nil, acl: nil, server_tick: nil, auth: nil, tls: nil,
                   ca_file: nil, cert_file: nil, key_file: nil, key_password: nil,
                   verify_hostname: true, sasl: nil)
      hosts = Native.text(hosts, "hosts")
      setters = [[:zkl_options_set_session_timeout,
                  Args.millis_u32(session_timeout, "session_timeout", 100, 3_600_000)]]
      unless connect_timeout.nil?
        setters << [:zkl_options_set_connect_timeout,
                    Args.millis_u32(connect_timeout, "connect_timeout", 1)]
      end
      setters << [:zkl_options_set_holder_id, Native.text(holder_id, "holder_id")] if holder_id
      unless server_tick.nil?
        setters << [:zkl_options_set_server_tick, Args.millis_u32(server_tick, "server_tick", 1)]
      end
      setters << [:zkl_options_set_protocol, Args.choice(protocol, PROTOCOLS, "protocol")] if protocol
      setters << [:zkl_options_set_acl, Args.choice(acl, ACLS, "acl")] if acl
      setters.concat(auth_setters(auth))
      setters.concat(tls_setters(tls, ca_file, cert_file, key_file, key_password, verify_hostname))
      setters.concat(sasl_setters(sasl))
      ptr = connect(hosts, setters)
      @hosts = hosts
      @handle = Handle.new(ptr, Native::F_zkl_client_free, "the client")
      # The handles of the locks made from this client and not freed (see Handle#file_in).
      @lock_handles = {}
      ObjectSpace.define_finalizer(self, @handle.finalizer)
      ZkLock.opened(self)
    end

    def inspect
      "#<#{self.class.name} #{@hosts} #{closed? ? :closed : session_state}>"
    end

    # A fair (FIFO), reentrant exclusive lock (Curator's InterProcessMutex).
    def mutex(path)
      make("mutex", :zkl_mutex_new, path)
    end

    # A fair exclusive lock that is not reentrant (acquiring it again: WouldDeadlock).
    def semaphore_mutex(path)
      make("semaphore_mutex", :zkl_semaphore_mutex_new, path)
    end

    # The shared half of the read-write lock at +path+.
    def read_lock(path)
      make("read_lock", :zkl_read_lock_new, path)
    end

    # The exclusive half of the read-write lock at +path+.
    def write_lock(path)
      make("write_lock", :zkl_write_lock_new, path)
    end

    # Both halves of one read-write lock, one participant: [read, write]. While the write
    # half is held the read half may be taken (downgrade); the reverse raises WouldDeadlock.
    def rwlock(path)
      p = Native.text(path, "path")
      read = Native.out_pointer
      write = Native.out_pointer
      ZkLock.check(@handle.use { |ptr| Native.call(:zkl_rwlock_new, ptr, p, read, write) })
      [track(Lock.new(Native.read_pointer(read), "read_lock", p, self)),
       track(Lock.new(Native.read_pointer(write), "write_lock", p, self))]
    end

    # At most +max_leases+ holders at once; each acquire takes one lease, each release gives
    # back the most recent. A handle whose own leases fill it gets WouldDeadlock.
    def semaphore(path, max_leases)
      make("semaphore", :zkl_semaphore_new, path, Args.u32(max_leases, "max_leases", 1))
    end

    # One ephemeral node at +path+ itself: cheapest, not fair, not reentrant.
    def simple_lock(path)
      make("simple_lock", :zkl_simple_lock_new, path)
    end

    # The holder id stored in this client's lock nodes.
    def holder_id
      out = Native.out_pointer
      ZkLock.check(@handle.use { |ptr| Native.call(:zkl_client_holder_id, ptr, out) })
      Fiddle::Pointer.new(Native.read_pointer(out)).to_s.force_encoding(Encoding::UTF_8)
    end

    # :connected, :suspended, :expired or :closed.
    def session_state
      out = Native.out_int64
      ZkLock.check(@handle.use { |ptr| Native.call(:zkl_client_session_state, ptr, out) })
      SESSION_STATES.fetch(Native.read_uint32(out))
    end

    # Ends the session now: its locks are closed first (a hold is released, its node going at
    # once; an acquire under way raises Cancelled; later calls on them raise Closed), then the
    # session. Idempotent.
    def close
      @lock_handles.keys.each(&:close)
      begin
        @handle.use { |ptr| Native.call(:zkl_client_close, ptr) }
      rescue Closed
        nil
      end
      @handle.close
      nil
    end

    def closed?
      @handle.closed?
    end

    private

    def connect(hosts, setters)
      out = Native.out_pointer
      ZkLock.check(Native.call(:zkl_options_new, out))
      opts = Native.read_pointer(out)
      begin
        setters.each { |name, *args| ZkLock.check(Native.call(name, opts, *args), hints: true) }
        ZkLock.check(Native.call(:zkl_client_connect_with_options, hosts, opts, out), hints: true)
      ensure
        Native.zkl_options_free(opts)
      end
      Native.read_pointer(out)
    end

    def make(kind, fn, path, *extra)
      p = Native.text(path, "path")
      out = Native.out_pointer
      ZkLock.check(@handle.use { |ptr| Native.call(fn, ptr, p, *extra, out) })
      track(Lock.new(Native.read_pointer(out), kind, p, self))
    end

    def track(lock)
      lock.file_in(@lock_handles)
      lock
    end

    def auth_setters(auth)
      return [] if auth.nil?

      unless auth.is_a?(Array) && auth.all? { |e| e.is_a?(Array) && e.size == 2 }
        raise TypeError, 'auth: must be [[scheme, credential], ...], e.g. [["digest", "user:pw"]]'
      end

      auth.map do |scheme, credential|
        [:zkl_options_add_auth, Native.text(scheme, "auth scheme"),
         Native.text(credential, "auth credential")]
      end
    end

    def tls_setters(tls, ca_file, cert_file, key_file, key_password, verify_hostname)
      unless [true, false, nil].include?(tls) && [true, false].include?(verify_hostname)
        raise TypeError, "tls: and verify_hostname: take true or false"
      end

      given = { ca_file: ca_file, cert_file: cert_file, key_file: key_file,
                key_password: key_password }.reject { |_, v| v.nil? }.keys
      given << :"verify_hostname: false" unless verify_hostname
      if tls == false && !given.empty?
        raise InvalidArgument.new("tls: false with #{given.join(', ')}: TLS settings need TLS " \
                                  "(drop tls: false, or the TLS settings)",
                                  Native::INVALID_ARGUMENT)
      end
      return [] unless tls || !given.empty?

      out = [[:zkl_options_use_tls]]
      out << [:zkl_options_set_tls_ca_file, Native.file(ca_file, "ca_file")] if ca_file
      if key_file && !cert_file
        raise InvalidArgument.new("key_file: without cert_file: give the client's certificate " \
                                  "too", Native::INVALID_ARGUMENT)
      end
      if cert_file
        cert = Native.file(cert_file, "cert_file")
        key = key_file ? Native.file(key_file, "key_file") : cert
        out << [:zkl_options_set_tls_identity_files, cert, key]
      end
      if key_password
        unless cert_file
          raise InvalidArgument.new("key_password: without a key: give cert_file: and key_file:",
                                    Native::INVALID_ARGUMENT)
        end
        out << [:zkl_options_set_tls_key_password, Native.text(key_password, "key_password")]
      end
      out << [:zkl_options_tls_danger_accept_any_server_name] unless verify_hostname
      out
    end

    def sasl_setters(sasl)
      return [] if sasl.nil?
      unless sasl.is_a?(Hash)
        raise TypeError, "sasl: must be a Hash such as { username: \"bob\", password: \"...\" }"
      end

      sasl = sasl.transform_keys(&:to_sym)
      mechanism = (sasl[:mechanism] || :digest_md5).to_s.downcase.tr("-", "_")
      keys = mechanism == "gssapi" ? %i[mechanism principal service host] : %i[mechanism username password]
      unknown = sasl.keys - keys
      unless unknown.empty?
        raise InvalidArgument.new("sasl: unknown key(s) #{unknown.join(', ')} (#{mechanism} " \
                                  "takes #{keys.join(', ')})", Native::INVALID_ARGUMENT)
      end
      case mechanism
      when "gssapi"
        opt = ->(k) { sasl[k] && Native.text(sasl[k], "sasl #{k}") }
        [[:zkl_options_set_sasl_gssapi, opt[:principal], opt[:service], opt[:host]]]
      when "digest_md5"
        missing = %i[username password].select { |k| sasl[k].nil? }
        unless missing.empty?
          raise InvalidArgument.new("sasl: DIGEST-MD5 needs #{missing.join(' and ')}",
                                    Native::INVALID_ARGUMENT)
        end
        [[:zkl_options_set_sasl_digest_md5, Native.text(sasl[:username], "sasl username"),
          Native.text(sasl[:password], "sasl password")]]
      else
        raise InvalidArgument.new("sasl: mechanism #{sasl[:mechanism].inspect} is not supported: " \
                                  ":digest_md5 and :gssapi (Kerberos) are", Native::INVALID_ARGUMENT)
      end
    end
  end
end
