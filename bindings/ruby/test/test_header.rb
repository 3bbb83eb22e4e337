# frozen_string_literal: true

require_relative "test_helper"

# The gem's table of C signatures (ZkLock::Native::SIGNATURES) matches include/zklock.h, and its
# status numbers match the header's: the two cannot drift apart.
class TestHeader < Minitest::Test
  HEADER = File.join(CHECKOUT, "include", "zklock.h")

  N = ZkLock::Native

  def setup
    skip "runs in the zklock checkout" unless File.exist?(HEADER)
  end

  def text
    @text ||= File.read(HEADER).gsub(%r{/\*.*?\*/}m, "").lines.reject { |l| l.lstrip.start_with?("#") }
                  .join.gsub(/extern "C" \{|\}\s*\/\/ extern "C"/, "").gsub(%r{//[^\n]*}, "")
                  .gsub(/\s+/, " ")
  end

  # name => [result, [parameter types]]
  def declarations
    text.scan(/([\w ]+?[\s*]+)(zkl_\w+)\(([^)]*)\);/).to_h do |ret, name, params|
      types = if params.strip == "void" || params.strip.empty?
                []
              else
                params.split(",").map { |p| p.strip.sub(/\w+\z/, "").strip }
              end
      [name, [ret.strip, types]]
    end
  end

  # A C type as the Fiddle type the gem must declare for it.
  def fiddle(decl)
    d = decl.gsub(/\b(const|struct|enum)\b/, "").gsub(/\s+/, " ").strip
    return N::VOID if d == "void"
    return N::S if d == "char *"
    return N::P if d.include?("*")

    { "zkl_status" => N::I, "int" => N::I, "uint32_t" => N::U32, "int64_t" => N::I64,
      "size_t" => N::SIZE }.fetch(d) { flunk "no Fiddle type for #{decl}" }
  end

  def test_signatures_match_the_header
    declared = declarations
    N::SIGNATURES.each do |name, (args, ret)|
      assert declared.key?(name.to_s), "#{name} is not in zklock.h"
      c_ret, c_args = declared[name.to_s]
      assert_equal fiddle(c_ret), ret, "#{name}: result #{c_ret}"
      assert_equal c_args.map { |a| fiddle(a) }, args, "#{name}: parameters #{c_args.inspect}"
    end
  end

  def test_status_numbers_match_the_header
    statuses = text[/typedef enum zkl_status \{(.*?)\}/, 1].scan(/ZKL_(\w+) = (\d+)/)
    refute_empty statuses
    statuses.each do |name, value|
      assert_equal Integer(value), N.const_get(name), "ZKL_#{name}"
      assert_equal "ZKL_#{name}", ZkLock.status_name(Integer(value))
      next if name == "OK"

      cls = ZkLock::Error.for_status(Integer(value))
      refute_equal ZkLock::Error, cls, "no exception class for ZKL_#{name}"
      assert_equal Integer(value), cls.new("m").status
    end
  end

  def test_the_loaded_library_is_the_gems_version
    assert_equal ZkLock::VERSION, ZkLock.library_version
    assert_equal ZkLock::VERSION, File.read(HEADER)[/ZKL_VERSION_STRING "([^"]+)"/, 1]
  end
end
