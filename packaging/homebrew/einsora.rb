# Homebrew formula for Einsora, built from the release's source tarball. scripts/release writes
# a copy with @VERSION@, @COMMIT@ and @SOURCE_SHA256@ filled in (dist/einsora.rb) for the tap.
#   brew install einsora/tap/einsora && einsora setup --email you@example.com && brew services start einsora
class Einsora < Formula
  desc "Notebooks, model endpoints and VMs on the machines you own"
  homepage "https://einsora.com"
  url "https://github.com/einsora/einsora/releases/download/v@VERSION@/einsora-@VERSION@-src.tar.gz"
  sha256 "@SOURCE_SHA256@"
  license "MIT"

  depends_on "rust" => :build
  depends_on :macos
  depends_on arch: :arm64

  def install
    ENV["EINSORA_RELEASE_VERSION"] = version.to_s
    ENV["EINSORA_RELEASE_COMMIT"] = "@COMMIT@"
    system "cargo", "install", *std_cargo_args(path: "cli")
    generate_completions_from_executable(bin/"einsora", "completion")
    system bin/"einsora", "man", "--out", buildpath/"man1"
    man1.install Dir[buildpath/"man1/*.1"]
  end

  # `brew services start einsora`: a launchd agent for the user, as packaging/macos's plist.
  service do
    run [opt_bin/"einsora", "up"]
    keep_alive successful_exit: false
    process_type :interactive
    log_path var/"log/einsora.log"
    error_log_path var/"log/einsora.log"
  end

  def caveats
    <<~EOS
      Create the owner account first, then start Einsora:
        einsora setup --email you@example.com
        brew services start einsora
      Its data is in ~/Library/Application Support/Einsora.
    EOS
  end

  test do
    assert_match version.to_s, shell_output("#{bin}/einsora --version")
    assert_match "launch", shell_output("#{bin}/einsora completion bash")
  end
end
